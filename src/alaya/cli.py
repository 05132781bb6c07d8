"""``alaya`` command line: thin dispatch to the library."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from alaya.cli_common import print_metrics
from alaya.paths import default_weights


def _datagen(a: argparse.Namespace) -> int:
    from alaya.engine.datagen import DatagenConfig, generate_dataset
    cfg = DatagenConfig(out=a.out, clips=a.clips, frames=a.frames, size=a.size,
                        styles=tuple(a.styles), rigs=tuple(a.rigs), seed=a.seed,
                        workers=a.workers, resume=a.resume, name=a.name)
    root = generate_dataset(cfg, progress=not a.quiet)
    print(f"dataset ready: {root} ({cfg.clips} clips x {cfg.frames} frames, {cfg.size}px, "
          f"{len(cfg.styles)} styles)")
    return 0


def _validate(a: argparse.Namespace) -> int:
    from alaya.data.validate import is_episodes_folder, validate_folder
    errors = validate_folder(a.root, progress=not a.quiet)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"{a.root}: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    what = "episode matches docs/episodes.md" if is_episodes_folder(a.root) else "clip matches the contract"
    print(f"{a.root}: every {what}")
    return 0


def _inspect(a: argparse.Namespace) -> int:
    from alaya.data.inspect import inspect_dataset, summarize
    print(summarize(a.root))
    out = Path(a.out) if a.out else Path(a.root) / "inspect"
    paths = inspect_dataset(a.root, out, clip_id=a.clip)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


def _import(a: argparse.Namespace) -> int:
    from alaya.data.importer import import_gbuffers
    root = import_gbuffers(a.src, a.out, dataset_name=a.name, up_axis=a.up_axis)
    print(f"imported into {root}")
    return 0


def _load_gbuffer_clips(a: argparse.Namespace) -> list[tuple[str, dict]]:
    """(name, clip arrays) from --clip FILE (checked against the contract first) or --gbuffers
    FOLDER (converted on the fly, checked the same way)."""
    from alaya.data.validate import read_valid_clip
    if a.clip:
        return [(Path(a.clip).stem, read_valid_clip(a.clip))]
    from alaya.data.importer import read_gbuffers
    return [(Path(a.gbuffers).name, read_gbuffers(a.gbuffers))]


def _renderer(model: str, weights: str | None, autoencoder: str, sampler, backend: str = "onnx",
              decoder: str | None = None):
    if model == "teacher":
        from alaya.renderers import TeacherRenderer
        return TeacherRenderer.from_pretrained(weights or default_weights("teacher"), autoencoder, sampler=sampler)
    if model == "student":
        from alaya.renderers import StudentRenderer
        return StudentRenderer.from_pretrained(weights or default_weights("student"), backend=backend,
                                               decoder=decoder or default_weights("guided_decoder"))
    raise ValueError(f"unknown model '{model}' (available: teacher, student)")


def _sampler(a: argparse.Namespace):
    from alaya.renderers import SamplerConfig
    if a.precision == "bf16":
        from alaya.hardware import cpu_info
        name, native = cpu_info()
        if native is False:
            print(f"warning: --precision bf16 on a CPU without native bf16 ({name or 'unknown'}): autocast is "
                  "emulated there and slower than fp32", file=sys.stderr)
    return SamplerConfig(steps=a.steps, guidance=a.guidance, sampler=a.sampler, shift=a.shift,
                         window=a.window, noise_scale=a.noise_scale, precision=a.precision)


def _render(a: argparse.Namespace) -> int:
    import numpy as np

    from alaya.renderers import write_frames
    clips = _load_gbuffer_clips(a)                 # refused before any weights load
    renderer = _renderer(a.model, a.weights, a.autoencoder, _sampler(a), a.backend, a.decoder)
    from alaya.data.contract import renderer_input
    progress = {"progress": True} if a.model == "teacher" else {}      # minutes on a CPU: a bar on stderr
    frames = np.concatenate([renderer.render(renderer_input(clip, 0, a.frames),
                                             a.prompt, seed=a.seed, **progress) for _, clip in clips])
    for path in write_frames(a.out, frames, fps=a.fps)[:3]:
        print(f"wrote {path}")
    return 0


def _play(a: argparse.Namespace) -> int:
    from alaya.serve.play import config_from_args, serve
    serve(config_from_args(a))
    return 0


def _export_onnx(a: argparse.Namespace) -> int:
    from alaya.codecs.guided import load_decoder
    from alaya.codecs.tiny import TinyGBufferEncoder
    from alaya.models.student import Student
    from alaya.runtime.graphs import export_onnx
    folder = export_onnx(Student.from_pretrained(a.weights), TinyGBufferEncoder.from_pretrained(a.gbuffer_encoder),
                         load_decoder(a.decoder), a.out, a.size)
    for name in ("frame", "step", "sample", "decode"):
        print(f"wrote {folder / (name + '.onnx')}")
    return 0


def _calibrate_int8(a: argparse.Namespace) -> int:
    from alaya.engine.styles import STYLES
    from alaya.renderers.calibrate import calibrate
    path = calibrate(a.weights, a.data, [s.phrasings for s in STYLES.values()], a.split, a.clips, a.frames,
                     a.gbuffer_encoder, a.decoder, method=a.method, percentile=a.percentile)
    print(f"wrote {path}")
    return 0


def _eval(a: argparse.Namespace) -> int:
    from alaya.evaluation.render_eval import RenderEvalConfig, codec_renderer, evaluate_renderer, public_json
    from alaya.evaluation.report import write_report
    cfg = RenderEvalConfig(data=a.data, split=a.split, clips=a.clips, frames=a.frames,
                           styles=tuple(a.styles) if a.styles else None, paraphrases=not a.no_paraphrases,
                           classifier=a.classifier, seed=a.seed)
    if a.model == "reference":
        from alaya.evaluation.render_eval import reference_renderer as render
    elif a.model == "codec":
        from alaya.codecs.autoencoder import Autoencoder
        render = codec_renderer(Autoencoder.from_pretrained(a.autoencoder).eval())
    else:
        renderer = _renderer(a.model, a.weights, a.autoencoder, _sampler(a), a.backend, a.decoder)

        def render(clip, style, prompt, seed):
            return renderer.render(clip, prompt, seed=seed)
    result = evaluate_renderer(render, cfg, progress=not a.json)
    if a.report:
        write_report(result, a.report, f"alaya eval render: {a.model}")
    out = public_json(result)
    if a.json:
        out.pop("rows")
        print(json.dumps(out))
    else:
        print_metrics(out, ("psnr", "psnr_geometry", "ssim", "warp_error", "reference_warp_error", "flicker",
                            "structure_f1", "sharpness_ratio", "block_grid_ratio", "gradient_error",
                            "style_accuracy", "style_accuracy_paraphrase", "s_per_frame"))
        if a.report:
            print(f"report: {Path(a.report) / 'report.md'}")
    return 0


def _styles(a: argparse.Namespace) -> int:
    from alaya.engine.styles import STYLES
    if a.json:
        print(json.dumps({n: s.to_json() for n, s in STYLES.items()}, indent=2))
    else:
        for name, s in STYLES.items():
            print(f"{name:14s} {s.description}")
            for p in s.phrasings:
                print(f"{'':14s}   \"{p}\"")
    return 0


def _serve(a: argparse.Namespace) -> int:
    """Start every service asked for on one SessionFactory, then block until Ctrl-C."""
    if a.grpc is None:
        raise ValueError("nothing to serve: give --grpc PORT")
    import torch
    from alaya.hardware import usable_cores
    from alaya.runtime import SessionFactory
    # one thread per graph: each stream runs its graphs side by side in a StreamPipeline, and
    # streams run beside each other (as alaya play); a frame alone (a client that waits for each
    # reply) runs on graphs with a thread per core
    torch.set_num_threads(1)
    from alaya.serve.play import server_prompt_encoder
    factory = SessionFactory.from_pretrained(a.weights, a.gbuffer_encoder, a.decoder, size=a.size,
                                             backend=a.backend, solo_threads=usable_cores(),
                                             prompt_encoder=server_prompt_encoder())
    from alaya.serve.grpc_server import GrpcConfig, start_grpc_server
    grpc_service = start_grpc_server(factory, GrpcConfig(
        port=a.grpc, host=a.host, max_sessions=a.max_sessions, max_message_mb=a.max_message_mb,
        model_name=Path(a.weights).name, backend=a.backend, idle_timeout=a.idle_timeout))
    from alaya.serve.play import freeze_loaded, preload_text_model
    preload_text_model(factory.prompt_encoder)    # free-text prompts: streams keep theirs until it is in
    freeze_loaded()                               # no full-heap garbage collections pausing the streams
    print(f"gRPC render service (alaya.v1.Renderer) on {grpc_service.address}: {a.size}x{a.size} frames, "
          f"{a.backend}, at most {a.max_sessions} sessions; Ctrl-C stops", flush=True)
    try:
        grpc_service.server.wait_for_termination()
    except KeyboardInterrupt:
        grpc_service.stop(grace=2.0)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from alaya import __version__
    from alaya.cli_train import add_train_command
    from alaya.cli_world import add_eval_world_command, add_record_commands
    from alaya.engine.camera import RIGS
    from alaya.engine.styles import STYLE_NAMES
    p = argparse.ArgumentParser(prog="alaya", description="Real-time generative worlds.")
    p.add_argument("--version", action="version", version=f"alaya {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("datagen", help="render a dataset of clips from procedural scenes")
    g.add_argument("--out", required=True, help="dataset folder")
    g.add_argument("--clips", type=int, default=8)
    g.add_argument("--frames", type=int, default=16)
    g.add_argument("--size", type=int, default=128, help="square frame size, a multiple of 16")
    g.add_argument("--styles", nargs="+", default=list(STYLE_NAMES), choices=STYLE_NAMES)
    g.add_argument("--rigs", nargs="+", default=list(RIGS), choices=RIGS)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--workers", type=int, default=1)
    g.add_argument("--name", default="alaya-procedural")
    g.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="finish an interrupted dataset in --out (default)")
    g.add_argument("--quiet", action="store_true")
    g.set_defaults(func=_datagen)

    v = sub.add_parser("validate", help="check every clip of a dataset against the contract (or every "
                       "episode of an episodes folder); lists every problem")
    v.add_argument("root", help="a dataset folder (dataset.json) or an episodes folder (episodes.json)")
    v.add_argument("--quiet", action="store_true")
    v.set_defaults(func=_validate)

    i = sub.add_parser("inspect", help="summary, contact sheet and per-style GIFs of a dataset")
    i.add_argument("root")
    i.add_argument("--out", help="output folder (default ROOT/inspect)")
    i.add_argument("--clip", help="clip id (default: the first test clip)")
    i.set_defaults(func=_inspect)

    im = sub.add_parser("import", help="convert data made elsewhere into the clip contract")
    isub = im.add_subparsers(dest="kind", required=True)
    gb = isub.add_parser("gbuffers", help="G-buffers (per-frame files or stacked arrays) + gbuffers.json "
                         "(docs/import.md)")
    gb.add_argument("src")
    gb.add_argument("--out", required=True)
    gb.add_argument("--name", default=None)
    gb.add_argument("--up-axis", choices=["z", "y"], default=None,
                    help="the source world's up axis (default: gbuffers.json camera.up_axis, else z); "
                         "y-up poses are turned into the contract's z-up world")
    gb.set_defaults(func=_import)

    add_record_commands(sub, isub, STYLE_NAMES)

    add_train_command(sub)

    def sampler_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--model", default="teacher",
                       help="renderer: teacher or student (eval also takes the baselines reference and codec)")
        q.add_argument("--backend", default="onnx", choices=["onnx", "onnx-int8", "torch"],
                       help="student: run its networks in onnxruntime (onnx-int8: its steps quantized) or torch")
        q.add_argument("--weights", help="save_pretrained folder (default weights/<model>)")
        q.add_argument("--decoder", help="student: its streaming decoder's folder (default weights/guided_decoder; "
                       "weights/tiny_decoder: the 8x8-block decoder)")
        q.add_argument("--autoencoder", default=default_weights("autoencoder"))
        q.add_argument("--steps", type=int, default=50,
                       help="teacher: sampling steps (the student uses the steps it was distilled for)")
        q.add_argument("--guidance", type=float, default=2.0, help="classifier-free guidance weight")
        q.add_argument("--sampler", default="euler", choices=["euler", "heun"])
        q.add_argument("--shift", type=float, default=1.0, help="time-grid shift (>1: more steps at high noise)")
        q.add_argument("--window", type=int, default=16, help="frames generated jointly")
        q.add_argument("--noise-scale", type=float, default=1.0,
                       help="teacher: scale of the starting noise (< 1: less spread, nearer the mean)")
        q.add_argument("--precision", default="fp32", choices=["bf16", "fp32"],
                       help="teacher: its network calls in fp32 or bf16 autocast (faster on CPUs with native bf16)")
        q.add_argument("--seed", type=int, default=0)

    r = sub.add_parser("render", help="G-buffers + a prompt -> video (mp4, gif or png frames)")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--clip", help="a clip file (DATASET/clips/ID.npz)")
    src.add_argument("--gbuffers", help="a folder of per-frame G-buffers + gbuffers.json (docs/import.md)")
    r.add_argument("--prompt", required=True)
    r.add_argument("--out", required=True, help="OUT.mp4, OUT.gif, OUT.png (numbered frames) or a folder")
    r.add_argument("--frames", type=int, default=None, help="at most this many frames per clip")
    r.add_argument("--fps", type=float, default=30.0)
    sampler_args(r)
    r.set_defaults(func=_render)

    ev = sub.add_parser("eval", help="evaluate a model")
    esub = ev.add_subparsers(dest="kind", required=True)
    er = esub.add_parser("render", help="a renderer against the reference on held-out clips")
    er.add_argument("--data", required=True, help="dataset folder (alaya datagen)")
    er.add_argument("--split", default="test")
    er.add_argument("--clips", type=int, default=4, help="first N clips of the split")
    er.add_argument("--frames", type=int, default=16, help="first N frames of each clip")
    er.add_argument("--styles", nargs="+", default=None)
    er.add_argument("--no-paraphrases", action="store_true", help="skip the held-out paraphrase pass")
    er.add_argument("--classifier", default=default_weights("style_classifier"))
    er.add_argument("--report", help="folder for report.md, results.json and figures")
    er.add_argument("--json", action="store_true", help="print one JSON object")
    sampler_args(er)
    er.set_defaults(func=_eval)

    add_eval_world_command(esub)

    ex = sub.add_parser("export-onnx", help="the student's per-frame networks as ONNX graphs (onnxruntime)")
    ex.add_argument("--weights", default=default_weights("student"))
    ex.add_argument("--gbuffer-encoder", default=default_weights("tiny_gbuffer_encoder"))
    ex.add_argument("--decoder", default=default_weights("guided_decoder"))
    ex.add_argument("--size", type=int, default=128, help="frame size (square, a multiple of 16)")
    ex.add_argument("--out", required=True,
                    help="folder for stream.onnx, frame.onnx, step.onnx, modulation.onnx, sample.onnx, decode.onnx")
    ex.set_defaults(func=_export_onnx)

    ci = sub.add_parser("calibrate-int8", help="activation ranges for the student's int8 steps (--backend onnx-int8)")
    ci.add_argument("--weights", default=default_weights("student"))
    ci.add_argument("--data", required=True, help="dataset folder whose clips are streamed")
    ci.add_argument("--split", default="train")
    ci.add_argument("--clips", type=int, default=4)
    ci.add_argument("--frames", type=int, default=8)
    ci.add_argument("--gbuffer-encoder", default=default_weights("tiny_gbuffer_encoder"))
    ci.add_argument("--decoder", default=default_weights("guided_decoder"))
    ci.add_argument("--method", default="percentile", choices=["percentile", "minmax"],
                    help="percentile: each activation's range without its rarest outliers")
    ci.add_argument("--percentile", type=float, default=99.99, help="with --method percentile")
    ci.set_defaults(func=_calibrate_int8)

    sv = sub.add_parser("serve", help="render sessions for other programs (gRPC for game engines)")
    sv.add_argument("--grpc", type=int, metavar="PORT", help="serve alaya.v1.Renderer over gRPC (docs/serve.md)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    sv.add_argument("--weights", default=default_weights("student"))
    sv.add_argument("--gbuffer-encoder", default=default_weights("tiny_gbuffer_encoder"))
    sv.add_argument("--decoder", default=default_weights("guided_decoder"))
    sv.add_argument("--backend", default="onnx-int8", choices=["onnx-int8", "onnx", "torch"],
                    help="onnx-int8: the student's steps quantized (ranges beside its weights)")
    sv.add_argument("--size", type=int, default=128, help="the frame size served (square, a multiple of 16)")
    sv.add_argument("--max-sessions", type=int, default=8, help="concurrent streams; more get RESOURCE_EXHAUSTED")
    sv.add_argument("--max-message-mb", type=float, default=16.0, help="largest incoming frame message")
    sv.add_argument("--idle-timeout", type=float, default=30.0, help="seconds without a frame before a stream "
                    "is ended (DEADLINE_EXCEEDED) and its session slot freed")
    sv.set_defaults(func=_serve)

    pl = sub.add_parser("play", help="the playable world in a browser (engine physics drawn by the student)")
    from alaya.serve.play import add_arguments as play_arguments
    play_arguments(pl)
    pl.set_defaults(func=_play)

    st = sub.add_parser("styles", help="list the reference renderer's styles and phrasings")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_styles)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileExistsError, FileNotFoundError, KeyError) as err:
        print(f"alaya {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
