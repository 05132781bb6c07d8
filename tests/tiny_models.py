"""Tiny models the runtime and serving tests share (imported as ``tiny_models``)."""


def tiny_flash_modules(guided: bool = False):
    """A tiny random student (4 latent channels, 20 G-buffer channels) with tiny codecs: what
    the runtime and serving tests stream through (perturbed so that outputs depend on every
    input, not the zero-initialised output layer alone). ``guided``: a guided decoder (it reads
    the frame's full-resolution G-buffer) instead of the tiny one."""
    import torch

    from alaya.codecs import TinyDecoder, TinyDecoderConfig, TinyGBufferEncoder, TinyGBufferEncoderConfig
    from alaya.models.student import Student, StudentConfig
    torch.manual_seed(0)
    student = Student(StudentConfig(latent_channels=4, gbuffer_channels=20, widths=(16, 16), emb_dim=16))
    with torch.no_grad():
        for p in student.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    enc = TinyGBufferEncoder(TinyGBufferEncoderConfig(latent_channels=4, width=4))
    dec = TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8)))
    if guided:
        from alaya.codecs.guided import GuidedDecoder, GuidedDecoderConfig
        dec = GuidedDecoder(GuidedDecoderConfig(latent_channels=4, widths=(4, 4, 8, 8)))
        with torch.no_grad():
            for p in dec.parameters():
                p.add_(torch.randn_like(p) * 0.05)
    return student, enc, dec
