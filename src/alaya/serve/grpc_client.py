"""The engine side of ``alaya serve --grpc`` in Python: frames to messages, messages to RGB.

```python
from alaya.serve.grpc_client import RenderClient, frame_to_message, message_to_rgb

with RenderClient("127.0.0.1:50051") as client:
    size = client.info().width
    messages = (frame_to_message(f, frame_id=i, prompt="a foggy morning" if i == 0 else None)
                for i, f in enumerate(frames))
    for reply in client.render(messages):        # one RGBFrame per message, in order
        rgb = message_to_rgb(reply)              # uint8 (H, W, 3)
```

``client.render`` sends from its own thread while replies come back, so a generator that waits
for the engine's next frame keeps the stream open.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import grpc
import numpy as np

from alaya.serve.proto import render_pb2, render_pb2_grpc
from alaya.serve.wire import CAMERA_FIELDS, WIRE_FIELDS, decode_rgb

ENCODINGS = {"raw": render_pb2.RAW_RGB8, "jpeg": render_pb2.JPEG}


def frame_to_message(frame: Mapping[str, np.ndarray], prompt: str | None = None, frame_id: int = 0,
                     reset: bool = False, seed: int = 0, encoding: str = "raw",
                     jpeg_quality: int = 0) -> render_pb2.GBufferFrame:
    """Clip-contract arrays of one frame (``depth`` (H, W), ``normal`` (H, W, 3), ...) -> a GBufferFrame.

    ``prompt``: switch to it from this frame on (None: keep the current one). ``encoding``:
    ``"raw"`` or ``"jpeg"`` for the reply."""
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {list(ENCODINGS)}, got {encoding!r}")
    H, W = np.shape(frame["depth"])
    fields = {}
    for key, (dtype, channels) in WIRE_FIELDS.items():
        if key not in frame:
            raise KeyError(f"G-buffer frame is missing '{key}'")
        shape = (H, W, channels) if channels > 1 else (H, W)
        if np.shape(frame[key]) != shape:
            raise ValueError(f"G-buffer '{key}': expected {shape}, got {np.shape(frame[key])}")
        fields[key] = np.ascontiguousarray(frame[key], dtype=dtype).tobytes()
    camera = {field: np.asarray(frame[key], np.float32).ravel().tolist()
              for field, key, _ in CAMERA_FIELDS if key in frame}        # optional: a view student reads it
    return render_pb2.GBufferFrame(frame_id=frame_id, width=W, height=H, prompt=prompt, reset=reset, seed=seed,
                                   encoding=ENCODINGS[encoding], jpeg_quality=jpeg_quality, **fields, **camera)


def message_to_rgb(msg: render_pb2.RGBFrame) -> np.ndarray:
    """An RGBFrame -> uint8 (H, W, 3), whichever its encoding."""
    return decode_rgb(msg.data, msg.encoding, msg.width, msg.height)


class RenderClient:
    """A channel to one server; ``render`` opens a stream, ``info`` asks for the server's limits."""

    def __init__(self, target: str, max_message_mb: float = 64.0):
        options = [("grpc.max_receive_message_length", int(max_message_mb * (1 << 20))),
                   ("grpc.max_send_message_length", int(max_message_mb * (1 << 20)))]
        self.channel = grpc.insecure_channel(target, options=options)
        self.stub = render_pb2_grpc.RendererStub(self.channel)

    def info(self, timeout: float | None = 30.0) -> render_pb2.InfoReply:
        return self.stub.Info(render_pb2.InfoRequest(), timeout=timeout)

    def render(self, messages: Iterable[render_pb2.GBufferFrame],
               timeout: float | None = None) -> Iterator[render_pb2.RGBFrame]:
        """The replies of one Render stream (also a ``grpc.Call``: ``.cancel()``, ``.code()``)."""
        return self.stub.Render(iter(messages), timeout=timeout)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "RenderClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
