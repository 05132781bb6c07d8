"""int8 student steps: static quantization of the steps' graph for onnxruntime.

The student's steps are most of a frame's cost. On a CPU with int8 dot products (AVX-512 VNNI,
AVX-VNNI, ARM dot product) onnxruntime's quantized convolutions run them faster than fp32. The
graph quantized is ``sample.onnx``, a frame's steps unrolled (``graphs._SampleNet``); the frame
and decode graphs stay float. What it costs and saves is in docs/flash.md ("int8 steps").

- Weights: int8, per output channel. Activations: uint8, per tensor, from ranges measured on
  real frames (``measure_ranges`` over the inputs and outputs of every convolution: by default
  the central 99.99% of each tensor's values, 0.005% cut from each end, so that rare outliers
  do not stretch its 256 levels; MinMax on request).
- Some convolutions stay float (``KEEP_FLOAT``, in every unrolled step): the first (the noisy
  latents in), the last (the prediction out: the velocity divides it by ``t``, which magnifies
  rounding at the last step) and every 1x1 convolution (cheap: in int8 no faster). The first
  level's blocks (``down0``) are quantized: with percentile ranges they cost little quality.
- The ranges are saved beside the weights (``RANGES_FILE``) with the sha256 of the weights they
  were measured on; ``load_ranges`` refuses ranges of other weights (re-run ``alaya
  calibrate-int8``). Ranges are keyed by the exported graph's tensor names.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from alaya.io import atomic_path, atomic_write_text

RANGES_FILE = "int8_ranges.json"
KEEP_FLOAT = ("stem", "out")   # the student's modules whose convolutions stay float


def _kept_float(name: str, modules: tuple[str, ...]) -> bool:
    """Whether a convolution node (``/down0.1/conv1/Conv``, or ``/down0.1/conv1_2/Conv`` in the
    third unrolled step, ``/stem_3/Conv``) belongs to one of ``modules``."""
    return re.match(rf"^/({'|'.join(map(re.escape, modules))})(_\d+)?[./]", name) is not None


def weights_digest(folder: str | os.PathLike) -> str:
    """sha256 of a weights folder's ``model.safetensors``."""
    path = Path(folder) / "model.safetensors"
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_ranges(ranges: Mapping, where: str) -> dict[str, tuple[float, float]]:
    if not isinstance(ranges, Mapping) or not ranges:
        raise ValueError(f"{where}: 'ranges' must be a non-empty mapping of tensor name -> [min, max]")
    out = {}
    for name, value in ranges.items():
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value) or value[0] > value[1]):
            raise ValueError(f"{where}: range of tensor {name!r} must be finite [min, max] with min <= max, got {value!r}")
        out[str(name)] = (float(value[0]), float(value[1]))
    return out


def save_ranges(folder: str | os.PathLike, ranges: Mapping, **metadata) -> Path:
    """Write ``RANGES_FILE`` into a student's weights folder (atomically), bound to its weights."""
    path = Path(folder) / RANGES_FILE
    ranges = _check_ranges(ranges, str(path))
    atomic_write_text(path, json.dumps({"weights_sha256": weights_digest(folder),
                                        "ranges": {k: list(v) for k, v in sorted(ranges.items())}, **metadata},
                                       indent=1, sort_keys=True))
    return path


def load_ranges(folder: str | os.PathLike) -> dict[str, tuple[float, float]]:
    """The activation ranges saved beside a student's weights; a clear error if they are missing,
    malformed or were measured on other weights."""
    path = Path(folder) / RANGES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; the int8 backend needs activation ranges measured on these "
                                f"weights: alaya calibrate-int8 --weights {folder} --data DATASET")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON: {e}") from e
    if not isinstance(meta, dict) or "ranges" not in meta or "weights_sha256" not in meta:
        raise ValueError(f"{path}: expected the keys 'ranges' and 'weights_sha256'")
    if meta["weights_sha256"] != weights_digest(folder):
        raise ValueError(f"{path}: measured on other weights than {Path(folder) / 'model.safetensors'} "
                         f"(sha256 differs); re-run alaya calibrate-int8 --weights {folder}")
    return _check_ranges(meta["ranges"], str(path))


def with_ranges(kwargs: dict, folder: str | os.PathLike) -> dict:
    """``kwargs`` of a renderer or session factory, with ``int8_ranges`` loaded from ``folder``
    when they ask for the ``onnx-int8`` backend without giving ranges."""
    if kwargs.get("backend") == "onnx-int8" and kwargs.get("int8_ranges") is None:
        return {**kwargs, "int8_ranges": load_ranges(folder)}
    return kwargs


class _Feeds:
    """An onnxruntime ``CalibrationDataReader`` over a list of input dicts."""

    def __init__(self, feeds: Iterable[Mapping[str, np.ndarray]]):
        self._it = iter([{k: np.ascontiguousarray(v, dtype=np.float32) for k, v in f.items()} for f in feeds])

    def get_next(self):
        return next(self._it, None)


def _preprocess(graph: Path, out: Path) -> Path:
    """onnxruntime's recommended pre-quantization pass (shape inference, basic fusions)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process
    quant_pre_process(str(graph), str(out), skip_symbolic_shape=True)
    return out


CALIBRATION_METHODS = ("minmax", "percentile")


def measure_ranges(graph: str | os.PathLike, feeds: Iterable[Mapping[str, np.ndarray]], method: str = "percentile",
                   percentile: float = 99.99) -> dict[str, tuple[float, float]]:
    """Ranges of every convolution's float inputs and outputs in ``graph`` over ``feeds`` (input
    name -> array dicts, e.g. recorded from a render session's steps): ``"percentile"`` (the
    central ``percentile`` % of each tensor's values by a 2,048-bin histogram, half the rest cut
    from each end: rare outliers no longer stretch the 256 levels of a whole tensor) or
    ``"minmax"``."""
    from onnxruntime.quantization import CalibrationMethod, create_calibrator
    if method not in CALIBRATION_METHODS:
        raise ValueError(f"calibration method must be one of {CALIBRATION_METHODS}, got {method!r}")
    if not 50 < percentile <= 100:
        raise ValueError(f"percentile must be in (50, 100], got {percentile}")
    feeds = list(feeds)
    if not feeds:
        raise ValueError("measure_ranges needs at least one feed")
    options = ({"calibrate_method": CalibrationMethod.MinMax} if method == "minmax" else
               {"calibrate_method": CalibrationMethod.Percentile,
                "extra_options": {"percentile": percentile, "symmetric": False, "num_bins": 2048}})
    with tempfile.TemporaryDirectory(prefix="alaya-int8-") as tmp:
        pre = _preprocess(Path(graph), Path(tmp) / "pre.onnx")
        calibrator = create_calibrator(str(pre), op_types_to_calibrate=["Conv"],
                                       augmented_model_path=str(Path(tmp) / "augmented.onnx"), **options)
        calibrator.collect_data(_Feeds(feeds))
        data = calibrator.compute_data()
        ranges = {name: (float(np.min(t.range_value[0])), float(np.max(t.range_value[1])))
                  for name, t in data.data.items()}
    return _check_ranges(ranges, f"ranges measured on {graph}")


def quantize_step(graph: str | os.PathLike, out: str | os.PathLike, ranges: Mapping,
                  keep_float: tuple[str, ...] = KEEP_FLOAT) -> Path:
    """Write ``graph`` (the sample or step graph) with its 3x3 convolutions quantized (QDQ), except
    those of the modules ``keep_float`` and the first and the last, to ``out`` (atomically), using
    ``ranges`` for their activations; a clear error naming the tensors ``ranges`` lacks. The
    graph's metadata (``alaya.steps``) is kept."""
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    ranges = _check_ranges(ranges, "int8 ranges")
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="alaya-int8-") as tmp:
        pre = _preprocess(Path(graph), Path(tmp) / "pre.onnx")
        model = onnx.load(str(pre))
        convs = [n for n in model.graph.node if n.op_type == "Conv"]
        if len(convs) < 3:
            raise ValueError(f"{graph}: expected the student's steps with several convolutions, found {len(convs)}")

        def one_by_one(node) -> bool:
            shape = next((list(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
            return shape is not None and all(k == 1 for k in shape)

        keep = {convs[0].name, convs[-1].name} | {n.name for n in convs if _kept_float(n.name, keep_float) or one_by_one(n)}
        quantized = [n for n in convs if n.name not in keep]
        if not quantized:
            raise ValueError(f"{graph}: no convolution left to quantize (keep_float={keep_float})")
        needed = sorted({n.input[0] for n in quantized} | {n.output[0] for n in quantized})
        missing = [t for t in needed if t not in ranges]
        if missing:
            raise ValueError(f"int8 ranges lack {len(missing)} tensors of {graph} (e.g. {missing[:3]}): they were "
                             "measured on another graph; re-run alaya calibrate-int8")
        overrides = {t: [{"rmin": np.array(ranges[t][0], np.float32), "rmax": np.array(ranges[t][1], np.float32)}]
                     for t in needed}
        inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
        dummy = [{k: np.zeros(s, np.float32) for k, s in inputs.items()}]   # ranges come from the overrides
        staged = Path(tmp) / "int8.onnx"
        quantize_static(str(pre), str(staged), _Feeds(dummy), quant_format=QuantFormat.QDQ, per_channel=True,
                        op_types_to_quantize=["Conv"], nodes_to_exclude=sorted(keep),
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        extra_options={"TensorQuantOverrides": overrides})
        result = onnx.load(str(staged))
        onnx.helper.set_model_props(result, {p.key: p.value for p in onnx.load(str(graph)).metadata_props})
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as part:
            onnx.save(result, str(part))
    return out
