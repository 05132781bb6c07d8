"""The wire format of ``render.proto``: G-buffer bytes -> checked arrays, RGB -> bytes.

Every G-buffer field travels as one raw little-endian array in the clip contract's layout
(``alaya.data.contract``), except that ``normal`` and ``motion`` are float32 on the wire
(float16 in clip files): engines hold them as 32-bit floats, and converting on the engine side
would cost more than the bytes it saves on a local link.

``decode_frame`` checks what the wire can get wrong (size, byte lengths, the camera's length)
and names the field in its error; the values (NaN, negative depth, normals that are not unit,
...) are checked by the session the frame goes to (``RenderSession._check``, with the clip
validator's rules, ``alaya.data.frame_checks``).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from alaya.serve.proto import render_pb2

# field -> (little-endian wire dtype, channels); arrays are row-major (H, W) or (H, W, C)
WIRE_FIELDS: dict[str, tuple[str, int]] = {
    "depth": ("<f4", 1),
    "normal": ("<f4", 3),
    "albedo": ("u1", 3),
    "roughness": ("u1", 1),
    "metallic": ("u1", 1),
    "motion": ("<f4", 2),
}
CAMERA_FIELDS = (("world_to_camera", "world_to_camera", (4, 4)), ("intrinsics", "K", (3, 3)))   # optional
DEFAULT_JPEG_QUALITY = 90


class FrameError(ValueError):
    """A GBufferFrame the server refuses; the message names the field and what was expected."""


def frame_nbytes(width: int, height: int) -> int:
    """Bytes of one frame's G-buffer fields on the wire."""
    return sum(width * height * c * np.dtype(d).itemsize for d, c in WIRE_FIELDS.values())


def decode_frame(msg, size: int) -> dict[str, np.ndarray]:
    """A GBufferFrame -> clip-contract arrays for ``RenderSession.step``; ``FrameError`` if unusable.

    The arrays are native-endian copies (writable, independent of the message buffer)."""
    if msg.ByteSize() == 0:
        raise FrameError("empty GBufferFrame: it carries no G-buffer")
    W, H = msg.width, msg.height
    if W <= 0 or H <= 0:
        raise FrameError(f"width and height must be positive, got {W}x{H}")
    if (W, H) != (size, size):
        raise FrameError(f"frame size {W}x{H}: this server renders {size}x{size} frames")
    frame = {}
    for key, (dtype, channels) in WIRE_FIELDS.items():
        data = getattr(msg, key)
        expected = H * W * channels * np.dtype(dtype).itemsize
        if len(data) != expected:
            raise FrameError(f"'{key}': expected {H}x{W}x{channels} {np.dtype(dtype).name} = {expected} bytes, "
                             f"got {len(data)}")
        shape = (H, W, channels) if channels > 1 else (H, W)
        frame[key] = np.frombuffer(data, dtype).reshape(shape).astype(np.dtype(dtype).newbyteorder("="))
    for field, key, shape in CAMERA_FIELDS:
        values = np.asarray(getattr(msg, field), np.float32)
        if values.size == 0:
            continue
        if values.size != np.prod(shape):
            raise FrameError(f"'{field}': expected {np.prod(shape)} floats (row-major {shape}) or none, got {values.size}")
        frame[key] = values.reshape(shape)
    return frame


def check_encoding(msg) -> tuple[int, int]:
    """(encoding, JPEG quality) a GBufferFrame asks for; ``FrameError`` for values out of range."""
    if msg.encoding not in render_pb2.Encoding.values():
        raise FrameError(f"unknown encoding {msg.encoding}; known: {dict(render_pb2.Encoding.items())}")
    quality = msg.jpeg_quality or DEFAULT_JPEG_QUALITY
    if not 1 <= quality <= 95:
        raise FrameError(f"jpeg_quality must be 1..95 (0: default {DEFAULT_JPEG_QUALITY}), got {quality}")
    return msg.encoding, quality


def encode_rgb(rgb: np.ndarray, encoding: int, quality: int = DEFAULT_JPEG_QUALITY) -> bytes:
    """uint8 (H, W, 3) -> the bytes of an RGBFrame's ``data``."""
    if encoding == render_pb2.JPEG:
        buf = io.BytesIO()
        Image.fromarray(rgb, "RGB").save(buf, "JPEG", quality=quality)
        return buf.getvalue()
    return np.ascontiguousarray(rgb, dtype=np.uint8).tobytes()


def decode_rgb(data: bytes, encoding: int, width: int, height: int) -> np.ndarray:
    """An RGBFrame's ``data`` -> uint8 (H, W, 3)."""
    if encoding == render_pb2.JPEG:
        rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    else:
        rgb = np.frombuffer(data, np.uint8)
        if rgb.size != height * width * 3:
            raise ValueError(f"RAW_RGB8 frame: expected {height * width * 3} bytes, got {rgb.size}")
        rgb = rgb.reshape(height, width, 3).copy()
    if rgb.shape != (height, width, 3):
        raise ValueError(f"RGB frame: expected {(height, width, 3)}, got {rgb.shape}")
    return rgb
