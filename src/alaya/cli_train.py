"""``alaya train``: the shared ``train`` parser and its dispatch to every recipe (codec, tiny
codecs, teacher, student, style classifier, world model, inverse dynamics). Thin dispatch only."""

from __future__ import annotations

import argparse

from alaya.paths import default_weights


# ``alaya train guided-decoder``'s own options: (flag, argparse keywords)
GUIDED_DECODER_OPTIONS = (
    ("--student", {"default": default_weights("student"),
                   "help": "guided-decoder: the student whose output latents it decodes"}),
    ("--gradient-weight", {"type": float, "default": 1.0,
                           "help": "guided-decoder: weight of the image-gradient L1 beside the pixel L1"}),
    ("--detail-weight", {"type": float, "default": 0.0,
                         "help": "guided-decoder: weight of the L1 between patches' detail (Laplacian) energy"}),
    ("--detail-loss", {"choices": ["energy", "relative_power"], "default": "energy",
                       "help": "guided-decoder: the detail term: L1 of the patches' Laplacian energies, or of their "
                               "squares over the frame's total"}),
    ("--albedo-gain", {"action": "store_true",
                       "help": "guided-decoder: the head also outputs a per-pixel gain on the G-buffer's albedo"}),
    ("--full-res-blocks", {"type": int, "default": None,
                           "help": "guided-decoder: residual blocks at full resolution (added at zero to --init's)"}),
    ("--sky-gain", {"action": "store_true",
                    "help": "guided-decoder: the head also outputs a colour for the sky's stars (the guide's star channel)"}),
    ("--style-weights", {"default": None,
                         "help": "guided-decoder: oversample styles, e.g. 'neon_night=3,foggy=2' (others weigh 1)"}),
    ("--style-detail", {"default": None,
                        "help": "guided-decoder: scale the detail term per style, e.g. 'neon_night=4' (others 1)"}),
    ("--adversarial-weight", {"type": float, "default": 0.0,
                              "help": "guided-decoder, world --memory: weight of a conditional patch critic's hinge loss "
                                      "(0: none; world: on the --one-step-t samples' 1-step frames)"}),
    ("--adversarial-start", {"type": int, "default": 250,
                             "help": "guided-decoder, world --memory: the step from which the generator fits the critic"}),
)


def parse_style_weights(text: str | None, flag: str = "--style-weights") -> dict[str, float] | None:
    """'neon_night=3,foggy=2' -> {'neon_night': 3.0, 'foggy': 2.0}; None or '' -> None."""
    if not text:
        return None
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ValueError(f"{flag}: expected 'style=weight' items separated by commas, got {item!r}")
    return out


def _train(a: argparse.Namespace) -> int:
    from alaya.train.loop import TrainConfig
    train = TrainConfig(run_dir=a.run_dir, steps=a.steps, batch_size=a.batch_size, lr=a.lr,
                        seed=a.seed, threads=a.threads, val_every=a.val_every,
                        ckpt_every=a.ckpt_every, ema=a.ema, bf16=a.bf16,
                        device=a.device)
    if a.what == "codec":
        from alaya.codecs.autoencoder import AutoencoderConfig
        from alaya.train.codecs import CodecTrainConfig, train_codec
        cfg = CodecTrainConfig(data=a.data, out=a.out or "weights/autoencoder", crop=a.crop,
                               autoencoder=AutoencoderConfig(latent_channels=a.latent_channels),
                               train=train)
        model = train_codec(cfg)
    elif a.what == "teacher":
        from alaya.train.teacher import TeacherTrainConfig, train_teacher
        model = train_teacher(TeacherTrainConfig(data=a.data, autoencoder=a.autoencoder,
                                                 out=a.out or "weights/teacher", frames=a.frames,
                                                 preset=a.preset, text_noise=a.text_noise,
                                                 init=a.init, init_keep_output=a.keep_output, t_mean=a.t_mean, t_one=a.one_step_t,
                                                 pixel_weighting=a.pixel_weighting, store_half=a.store_half,
                                                 view=a.view, view_gbuffer=a.view_gbuffer, view_pixel=a.view_pixel,
                                                 view_dropout=a.view_dropout, train=train))
    elif a.what == "student":
        from alaya.train.student import StudentTrainConfig, train_student
        model = train_student(StudentTrainConfig(
            data=a.data, stage=a.stage, teacher=a.teacher, autoencoder=a.autoencoder, init=a.init,
            out=a.out or f"weights/student_{a.stage}", guidance=a.guidance, sample_steps=a.sample_steps,
            rollout=a.rollout, meanflow_max_frequency=a.meanflow_max_frequency or None,
            text_noise=a.text_noise, data_weight=a.data_weight, t_one=a.one_step_t,
            teacher_weight=a.teacher_weight, teacher_window=a.teacher_window,
            context_noise=0.1 if a.context_noise is None else a.context_noise, self_context=a.self_context,
            widths=tuple(int(w) for w in a.student_widths.split(",")) if a.student_widths else None,
            blocks=a.student_blocks, noise=a.noise, train=train))
    elif a.what == "guided-decoder":
        from alaya.train.guided_decoder import GuidedDecoderTrainConfig, train_guided_decoder
        model = train_guided_decoder(GuidedDecoderTrainConfig(
            data=a.data, student=a.student, out=a.out or "weights/guided_decoder",
            gradient_weight=a.gradient_weight, init=a.init, albedo_gain=a.albedo_gain, sky_gain=a.sky_gain,
            full_res_blocks=a.full_res_blocks,
            detail_weight=a.detail_weight, detail_loss=a.detail_loss,
            style_weights=parse_style_weights(a.style_weights, "--style-weights"),
            style_detail=parse_style_weights(a.style_detail, "--style-detail"),
            adversarial_weight=a.adversarial_weight, adversarial_start=a.adversarial_start, train=train))
    elif a.what == "world":
        from alaya.cli_world_train import train_world_from_args
        model = train_world_from_args(a, train)
    elif a.what == "motion":
        from alaya.cli_world_train import train_motion_from_args
        model = train_motion_from_args(a, train)
    elif a.what == "effects":
        from alaya.cli_world_train import train_effects_from_args
        model = train_effects_from_args(a, train)
    elif a.what == "wall-detail":
        from alaya.cli_world_train import train_wall_detail_from_args
        model = train_wall_detail_from_args(a, train)
    elif a.what == "idm":
        from alaya.data.episodes import EpisodeDataset
        from alaya.evaluation.inverse_dynamics import train_idm
        model = train_idm(EpisodeDataset(a.data), a.out or "weights/inverse_dynamics", steps=a.steps,
                          batch_size=a.batch_size, lr=a.lr, seed=a.seed)
    elif a.what == "style-classifier":
        from alaya.train.style_classifier import StyleClassifierTrainConfig, train_style_classifier
        model = train_style_classifier(StyleClassifierTrainConfig(
            data=a.data, out=a.out or "weights/style_classifier", train=train))
    else:
        from alaya.train.tiny_codecs import TinyCodecTrainConfig, train_tiny_codecs
        cfg = TinyCodecTrainConfig(data=a.data, autoencoder=a.autoencoder, train=train,
                                   out_encoder=a.out or "weights/tiny_gbuffer_encoder",
                                   out_decoder=a.out_decoder or "weights/tiny_decoder",
                                   pairs=a.pairs)
        model = train_tiny_codecs(cfg)
    if a.dry_run:
        return 0
    print(f"trained {type(model).__name__}; run folder {a.run_dir}")
    return 0


def add_train_command(sub) -> None:
    """The ``train`` sub-command on ``alaya``'s sub-parsers."""
    from alaya.cli_world_train import add_world_train_args
    tr = sub.add_parser("train", help="train a model (checkpoints resume after a kill)")
    tr.add_argument("what", choices=["codec", "tiny-codecs", "teacher", "student", "style-classifier", "world", "idm",
                                     "guided-decoder", "motion", "effects", "wall-detail"])
    tr.add_argument("--data", required=True, help="dataset folder (alaya datagen; world: alaya record)")
    tr.add_argument("--run-dir", required=True, help="run folder: config, metrics, checkpoints")
    tr.add_argument("--out", help="save_pretrained folder for the result")
    tr.add_argument("--out-decoder", help="tiny-codecs: folder for the tiny decoder")
    tr.add_argument("--autoencoder", default=default_weights("autoencoder"), help="the full codec (tiny-codecs, teacher)")
    tr.add_argument("--steps", type=int, default=2000)
    tr.add_argument("--batch-size", type=int, default=32)
    tr.add_argument("--lr", type=float, default=1e-3)
    tr.add_argument("--crop", type=int, default=64)
    tr.add_argument("--latent-channels", type=int, default=32)
    tr.add_argument("--pairs", type=int, default=1536, help="tiny-codecs: cached frame pairs")
    tr.add_argument("--frames", type=int, default=8,
                    help="teacher: frames per training window; effects: frames from a press with a layer")
    tr.add_argument("--preset", default="small", help="teacher: size preset (tiny, small, base)")
    tr.add_argument("--text-noise", type=float, default=1.0, help="teacher, student: prompt augmentation")
    tr.add_argument("--t-mean", type=float, default=0.0, help="teacher: logit-normal mean of training times")
    tr.add_argument("--store-half", action="store_true", help="teacher: write the weights as float16")
    tr.add_argument("--pixel-weighting", type=float, default=0.0,
                    help="teacher: 0..1, weight latent channels by their pixel-space gain")
    tr.add_argument("--view", action="store_true",
                    help="teacher: add the view branch (world-space normal and view ray from the camera pose)")
    tr.add_argument("--view-gbuffer", action="store_true",
                    help="teacher, with --view: the view input also carries the raw G-buffer at pixel resolution")
    tr.add_argument("--view-pixel", type=int, default=0,
                    help="teacher, with --view: per-pixel MLP features added to the view input before blocking")
    tr.add_argument("--view-dropout", type=float, default=0.1,
                    help="teacher: share of samples shown a zero camera (camera unknown)")
    tr.add_argument("--stage", default="ar", help="student: ar, guidance, steps, meanflow or tiny; then optionally compress "
                    "(a smaller student from the finished one)")
    tr.add_argument("--init", help="student: the previous stage's weights folder; guided-decoder: a trained decoder's "
                    "folder; teacher: a "
                    "model.safetensors to start from (its output layer is reset unless --keep-output)")
    tr.add_argument("--keep-output", action="store_true",
                    help="teacher: keep --init's output layer (continue a released teacher)")
    tr.add_argument("--teacher", default=default_weights("teacher"), help="student: the teacher")
    tr.add_argument("--guidance", type=float, default=2.0, help="student: guidance weight folded in")
    tr.add_argument("--sample-steps", type=int, default=8, help="student 'steps': the previous stage's steps")
    tr.add_argument("--rollout", type=int, default=2,
                    help="student 'meanflow', world: self-generated context frames")
    tr.add_argument("--meanflow-max-frequency", type=float, default=64.0,
                    help="student 'meanflow': du/dt leaves out time-embedding features faster than this "
                         "(radians per unit t; 0: the exact derivative)")
    add_world_train_args(tr)
    tr.add_argument("--student-widths", help="student 'ar', 'compress': widths of a new student, e.g. 48,64")
    tr.add_argument("--noise", choices=["frame", "fixed"],
                    help="student: sampling noise the result streams with (fixed: the same every frame, less flicker)")
    tr.add_argument("--student-blocks", type=int, help="student 'ar', 'compress': blocks per level of a new student")
    tr.add_argument("--data-weight", type=float, default=0.0,
                    help="student: also fit the data itself, with this weight (beyond the teacher)")
    tr.add_argument("--teacher-weight", type=float, default=1.0,
                    help="student 'ar', 'guidance': weight of the teacher's target (0: data only, no teacher call)")
    tr.add_argument("--self-context", type=float, default=0.0,
                    help="student 'ar', 'guidance': share of steps whose context the student rolls out itself "
                         "(--rollout frames)")
    for flag, kwargs in GUIDED_DECODER_OPTIONS:
        tr.add_argument(flag, **kwargs)
    tr.add_argument("--teacher-window", type=int, default=4, help="student: frames the teacher sees")
    tr.add_argument("--ema", type=float, default=0.0)
    tr.add_argument("--bf16", action="store_true")
    tr.add_argument("--device", default="auto",
                    help="auto (CUDA when torch sees a GPU, for recipes that support it), cpu, cuda or cuda:N")
    tr.add_argument("--val-every", type=int, default=250)
    tr.add_argument("--ckpt-every", type=int, default=250)
    tr.add_argument("--threads", type=int, default=None)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--dry-run", action="store_true", help=argparse.SUPPRESS)
    tr.set_defaults(func=_train)
