"""``alaya calibrate-int8``: the int8 student's activation ranges, measured by rendering clips.

Clips stream through the fp32 ONNX student as a :class:`StudentRenderer` (so exactly as it
renders), each in every style; the inputs of its sample graph (a frame's steps, unrolled) are
recorded, and ``alaya.runtime.int8.measure_ranges`` turns them into the ranges saved beside the
weights (``RANGES_FILE``). The quantization itself is in ``alaya.runtime.int8``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from alaya.codecs.guided import load_decoder
from alaya.codecs.tiny import TinyGBufferEncoder
from alaya.data.contract import renderer_input
from alaya.data.dataset import ClipDataset
from alaya.models.student import Student
from alaya.paths import default_weights
from alaya.renderers.student import StudentRenderer
from alaya.runtime.int8 import measure_ranges, save_ranges
from alaya.runtime.onnx_backend import OnnxBackend


class _RecordingBackend(OnnxBackend):
    """An ``OnnxBackend`` whose sample-graph inputs are kept (for ``measure_ranges``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.feeds = []

    def sample(self, z, text, features):
        self.feeds.append({k: v.copy() for k, v in self.sample_feed(z, text, features).items()})
        return super().sample(z, text, features)


def calibrate(weights: str | os.PathLike, data: str | os.PathLike, phrasings: Sequence[Sequence[str]],
              split: str = "train", clips: int = 4, frames: int = 8,
              gbuffer_encoder: str | os.PathLike = default_weights("tiny_gbuffer_encoder"),
              decoder: str | os.PathLike = default_weights("guided_decoder"), progress: bool = True,
              method: str = "percentile", percentile: float = 99.99) -> Path:
    """Stream ``clips`` clips of ``split`` (``frames`` frames each) once per style, prompted with
    that style's ``phrasings`` in turn (one list per style: the training phrasings), through the
    fp32 ONNX student; save the ranges (``measure_ranges``'s ``method``) of its sample graph's
    convolutions beside ``weights`` (``RANGES_FILE``)."""
    if clips < 1 or frames < 1:
        raise ValueError(f"clips and frames must be >= 1, got {clips}, {frames}")
    if not phrasings or not all(phrasings):
        raise ValueError("phrasings: one non-empty list of prompts per style")
    ds = ClipDataset(data)
    ids = ds.ids(split)[:clips]
    if not ids:
        raise ValueError(f"{data}: split {split!r} has no clips")
    student = Student.from_pretrained(weights)
    enc, dec = TinyGBufferEncoder.from_pretrained(gbuffer_encoder), load_decoder(decoder)
    inputs = [renderer_input(ds.load(i), 0, frames) for i in ids]
    size = int(np.shape(inputs[0]["depth"])[-1])
    with tempfile.TemporaryDirectory(prefix="alaya-int8-") as tmp:
        recorder = _RecordingBackend.from_modules(student, enc, dec, size, tmp)
        renderer = StudentRenderer(student, gbuffer_encoder=enc, decoder=dec, backend=recorder)
        jobs = [(x, style) for x in inputs for style in phrasings]
        for n, (x, style) in enumerate(tqdm(jobs, desc="int8 calibration", disable=not progress)):
            renderer.render(x, style[n % len(style)], seed=n)
        if not recorder.feeds:
            raise ValueError(f"calibration recorded no frames: the student's steps ({renderer.steps}) differ from "
                             f"its sample graph's ({recorder.sample_steps})")
        ranges = measure_ranges(Path(tmp) / "sample.onnx", recorder.feeds, method, percentile)
    return save_ranges(weights, ranges, graph="sample", method=method,
                       **({"percentile": percentile} if method == "percentile" else {}), calibration={
        "data": str(data), "split": split, "clips": ids, "frames": frames, "frames_recorded": len(recorder.feeds)})
