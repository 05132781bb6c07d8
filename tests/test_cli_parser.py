"""The command line's flags reach the commands that read them."""

import pytest

from alaya.cli import build_parser


def test_world_train_flags_parse_and_keep_their_defaults():
    p = build_parser()
    a = p.parse_args(["train", "world", "--data", "d", "--run-dir", "r", "--still-prob", "0.2", "--ground-warp",
                      "--error-prob", "0.4"])
    assert (a.still_prob, a.ground_warp, a.view_warp, a.error_prob) == (0.2, True, False, 0.4)
    b = p.parse_args(["train", "teacher", "--data", "d", "--run-dir", "r"])
    assert (b.still_prob, b.ground_warp, b.rollout_prob, b.context_noise) == (0.0, False, 0.0, None)  # per recipe: world 0.5, student 0.1


def test_eval_world_takes_the_standing_still_length():
    p = build_parser()
    assert p.parse_args(["eval", "world", "--data", "d"]).still_frames == 60
    assert p.parse_args(["eval", "world", "--data", "d", "--still-frames", "30"]).still_frames == 30
    with pytest.raises(SystemExit):
        p.parse_args(["eval", "world", "--data", "d", "--still-frames", "many"])


def test_unrolled_loss_flags_reach_the_world_run(monkeypatch):
    import alaya.train.world as wt
    from alaya.cli_world_train import train_world_from_args
    seen = {}
    monkeypatch.setattr(wt, "train_world", lambda cfg: seen.setdefault("cfg", cfg))
    a = build_parser().parse_args(["train", "world", "--data", "d", "--run-dir", "r", "--unroll", "8",
                                   "--unroll-batch", "4", "--unroll-weight", "0.5", "--unroll-still-prob", "0.4"])
    cfg = train_world_from_args(a, "train-config")
    assert (cfg.unroll, cfg.unroll_batch, cfg.unroll_weight, cfg.unroll_still_prob) == (8, 4, 0.5, 0.4)
    b = build_parser().parse_args(["train", "world", "--data", "d", "--run-dir", "r"])
    assert (b.unroll, b.unroll_still_prob) == (0, None)


def test_teacher_flags_reach_the_teacher_run(monkeypatch):
    import alaya.train.teacher as tt
    from alaya.cli_train import _train
    seen = {}
    monkeypatch.setattr(tt, "train_teacher", lambda cfg: seen.setdefault("cfg", cfg) and None)
    a = build_parser().parse_args(["train", "teacher", "--data", "d", "--run-dir", "r", "--one-step-t", "0.5",
                                   "--t-mean", "0.5", "--pixel-weighting", "0.5", "--frames", "3", "--keep-output"])
    assert _train(a) == 0
    cfg = seen["cfg"]
    assert (cfg.t_one, cfg.t_mean, cfg.pixel_weighting, cfg.frames, cfg.init_keep_output) == (0.5, 0.5, 0.5, 3, True)


def test_student_flags_reach_the_student_run(monkeypatch):
    import alaya.train.student as st
    from alaya.cli_train import _train
    seen = {}
    monkeypatch.setattr(st, "train_student", lambda cfg: seen.setdefault("cfg", cfg) and None)
    a = build_parser().parse_args(["train", "student", "--data", "d", "--run-dir", "r", "--stage", "ar",
                                   "--one-step-t", "0.25", "--data-weight", "2.0"])
    assert _train(a) == 0
    assert (seen["cfg"].t_one, seen["cfg"].data_weight, seen["cfg"].stage) == (0.25, 2.0, "ar")
    assert seen["cfg"].meanflow_max_frequency == 64.0                  # MeanFlow's held phases by default
    for flag, value in (("0", None), ("32", 32.0)):                    # 0: the exact derivative
        seen.clear()
        assert _train(build_parser().parse_args(["train", "student", "--data", "d", "--run-dir", "r", "--stage",
                                                 "meanflow", "--meanflow-max-frequency", flag])) == 0
        assert seen["cfg"].meanflow_max_frequency == value


def test_play_defaults_to_int8_steps_but_not_for_the_world_model():
    from alaya.serve.play import PlayConfig
    assert PlayConfig().backend == "onnx-int8"
    assert PlayConfig(world=True).backend == "onnx"
    assert PlayConfig(backend="torch").backend == "torch"
    with pytest.raises(ValueError, match="world model"):
        PlayConfig(world=True, backend="onnx-int8")
    a = build_parser().parse_args(["calibrate-int8", "--data", "d", "--clips", "2"])
    from alaya.paths import default_weights
    assert (a.weights, a.split, a.clips, a.frames) == (default_weights("student"), "train", 2, 8)
    assert a.decoder == default_weights("guided_decoder")       # the Flash renderer's shipped decoder
    assert build_parser().parse_args(["serve", "--grpc", "1"]).backend == "onnx-int8"
