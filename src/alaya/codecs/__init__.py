"""Latent codecs: the full RGB autoencoder, the tiny G-buffer encoder and the tiny decoder."""

from alaya.codecs.autoencoder import Autoencoder, AutoencoderConfig
from alaya.codecs.tiny import StreamingDecoder, TinyDecoder, TinyDecoderConfig, TinyGBufferEncoder, TinyGBufferEncoderConfig

__all__ = ["Autoencoder", "AutoencoderConfig", "TinyDecoder", "TinyDecoderConfig",
           "TinyGBufferEncoder", "TinyGBufferEncoderConfig", "StreamingDecoder"]
