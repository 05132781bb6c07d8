"""``alaya`` commands of the world model: recording and importing gameplay and evaluating a world
model (the ``alaya train`` parser and ``train idm`` live in ``cli_train.py``, the world's training
flags and runs in ``cli_world_train.py``, ``alaya play --world`` in ``cli.py`` and
``serve/play.py``). Thin dispatch only."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from alaya.cli_common import print_metrics
from alaya.paths import default_weights


def _print_tail(skipped: str | None, report) -> int:
    """An evaluation's last lines: what it skipped (if anything) and where its report went."""
    if skipped:
        print(skipped)
    if report:
        print(f"report: {report}")
    return 0


def _record(a: argparse.Namespace) -> int:
    if a.source == "game":
        from alaya.engine.game import GameConfig
        from alaya.engine.gameplay import GameplayConfig, record_gameplay
        from alaya.engine.players import PlayerConfig
        cfg = GameplayConfig(episodes=a.episodes, frames=a.frames, first_seed=a.seed, styles=tuple(a.styles),
                             game=GameConfig(size=a.size), player=PlayerConfig(wall_contact=a.wall_contact))
        done = record_gameplay(a.out, cfg, progress=not a.quiet)
        print(f"recorded {len(done)} episodes into {a.out} ({a.frames} frames, {a.size}px, styles {', '.join(a.styles)})")
        return 0
    from alaya.data.gym_adapter import record_gym
    action_map = a.action_map
    if action_map is not None and action_map.startswith("@"):     # @FILE: the JSON in a file
        action_map = Path(action_map[1:]).read_text(encoding="utf-8")
    paths = record_gym(a.env, a.out, episodes=a.episodes, max_steps=a.frames, size=a.size, seed=a.seed,
                       action_map=action_map, progress=not a.quiet, env_kwargs=a.env_kwargs,
                       min_frames=a.min_frames)
    print(f"recorded {len(paths)} episodes of {a.env} into {a.out}")
    return 0


def _import_video(a: argparse.Namespace) -> int:
    from alaya.data.video_import import import_video
    result = import_video(a.video, a.poses, a.out, a.id, size=a.size, fps=a.fps, style=a.style)
    print(f"imported {result.frames} frames at {result.fps:g} FPS into {result.path} "
          f"({result.clipped} navigation values clipped to [-1, 1])")
    return 0


def _eval_world_live(a: argparse.Namespace) -> int:
    """``alaya eval world --live``: sessions made as ``alaya play --world`` makes them, played
    with the live scripts beside the real game (``alaya.evaluation.world_live``)."""
    import torch

    from alaya.data.actions import ACTION_COLUMNS
    from alaya.evaluation.live_reference import game_player, start_scenes
    from alaya.evaluation.live_report import write_live_report
    from alaya.evaluation.live_scripts import data_action_columns
    from alaya.evaluation.live_seeds import over_seeds
    from alaya.evaluation.world_live import LiveConfig, evaluate_live, public_json
    from alaya.hardware import usable_cores
    from alaya.runtime.world_folder import shipped_size
    from alaya.runtime.world_factory import WorldSessionFactory
    torch.set_num_threads(1)              # as alaya play: the networks run in onnxruntime's own pool
    size = a.size or shipped_size(a.weights)
    scripts = tuple(s for arg in a.scripts for s in arg.split(",") if s)
    columns = tuple(data_action_columns(a.data)) if a.data else ACTION_COLUMNS
    cfg = LiveConfig(scripts=scripts, frames=a.frames, window=a.window, seed=a.seed, columns=columns,
                     actions=not a.no_action_check)
    scenes = start_scenes(a.weights, size, a.data, a.scenes, start_depth=not a.predict_start_depth)
    factory = WorldSessionFactory.from_pretrained(a.weights, size=size, backend=a.backend,
                                                  solo_threads=usable_cores())      # as alaya play
    if a.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {a.seeds}")
    seeds, outs = list(range(a.seed, a.seed + a.seeds)), []
    for seed in seeds:                    # each seed draws the play script and seeds the sessions' noise
        cfg.seed = seed
        result = evaluate_live(lambda scene, seed=seed: factory.new(scene.prompt, seed), game_player(size), scenes,
                               cfg, progress=True)
        result["config"].update(weights=a.weights, size=size, backend=a.backend, data=a.data,
                                start_depth="predicted" if a.predict_start_depth else "recorded",
                                camera="learned" if factory.camera_motion is not None else "kinematic")
        if a.report and seed == seeds[0]:
            write_live_report(result, a.report)
        outs.append(public_json(result))
    out = outs[0] if len(seeds) == 1 else over_seeds(outs, seeds)
    if a.json:
        print(json.dumps(out))
        return 0
    print_metrics(out, ("sharpness_min", "sharpness_max", "sharpness_in_band", "orientation_max", "structure_max",
                        "structure_game_ratio", "colour_drift", "colour_drift_pooled", "game_colour_change",
                        "still_psnr_min", "still_psnr_mean", "still_psnr_static_min", "still_hf_ratio_max",
                        "walk_back_return_psnr", "psnr_mean", "fps", "action_ratio_min", "action_placement_min"),
                  width=30)
    if len(seeds) > 1:
        print(f"the worst of seeds {seeds[0]}-{seeds[-1]} above; per seed:")
        for row in out["per_seed"]:
            print(f"seed {row['seed']:3d} " + ", ".join(f"{k} {row[k]:.3f}" for k in ("sharpness_min", "colour_drift_pooled",
                  "structure_game_ratio", "still_psnr_min", "walk_back_return_psnr") if row[k] is not None))
        print(f"the scripts below are seed {seeds[0]}'s")
    for name, s in out["scripts"].items():
        print(f"{name:10s} sharpness per window {' '.join(f'{r:.3f}' for r in s['sharpness_windows'])}, "
              f"edge orientation distance {' '.join(f'{r:.3f}' for r in s['orientation_windows'])}, "
              f"structure distance {' '.join(f'{r:.3f}' for r in s['structure_windows'])}")
    for action, r in out["actions"].get("responses", {}).items():
        print(f"{action:10s} response {r['generated']:.2f} grey levels, the game's {r['real']:.2f} "
              f"(ratio {r['ratio']:.2f}, placement {r['placement']:.2f})")
    skipped = out["skipped_actions"] or out["skipped_scripts"]
    return _print_tail(f"skipped: actions {out['skipped_actions']}, scripts {out['skipped_scripts']}" if skipped
                       else None, a.report)


def _eval_world(a: argparse.Namespace) -> int:
    if a.live:
        return _eval_world_live(a)
    if not a.data:
        raise SystemExit("alaya eval world: --data is required (except with --live)")
    from alaya.data.episodes import EpisodeDataset
    from alaya.evaluation.world_eval import WorldEvalConfig, evaluate_world, load_idm, public_json
    from alaya.evaluation.world_report import write_world_report
    from alaya.runtime.world_folder import shipped_size
    from alaya.runtime.world_factory import WorldSessionFactory
    a.size = a.size or shipped_size(a.weights)
    from alaya.evaluation.other_data import data_action_ranges, idm_mismatch
    factory = WorldSessionFactory.from_pretrained(a.weights, size=a.size, backend=a.backend)
    ds = EpisodeDataset(a.data)
    ranges = data_action_ranges(a.data)           # scripted inputs fitted to the data's columns (other_data)
    cfg = WorldEvalConfig(horizon=a.horizon, episodes=a.episodes, split=a.split, rollout_frames=a.rollout_frames,
                          still_frames=a.still_frames, seed=a.seed, action_ranges=ranges,
                          start_depth=not a.predict_start_depth, start_history=a.start_history)
    idm_skip = idm_mismatch(a.idm, ds.ids()) if a.idm else "no --idm given"
    result = evaluate_world(lambda: factory.new(seed=a.seed), ds, None if idm_skip else load_idm(a.idm), cfg,
                            prompts=ds.meta.styles, progress=not a.json)
    if idm_skip:
        result["skipped"]["idm_ratio"] = idm_skip
    if a.game_reference:                 # the game's own long-rollout statistics, same actions and start
        from alaya.evaluation.scripted_play import scripted_actions
        from alaya.evaluation.world_reference import game_long_rollout
        eid = ds.ids(a.split)[0]
        seed, ep = ds.meta.episodes[eid]["seed"], ds.load(eid)
        if seed is None or ds.meta.source != "alaya-game":
            raise SystemExit(f"--game-reference: episode {eid} was not recorded from our game "
                             f"(source {ds.meta.source!r}, seed {seed!r})")
        result.update(game_long_rollout(seed, str(ep["styles"][0]), scripted_actions(cfg.rollout_frames, cfg.seed),
                                        a.size, result["rollout_window_used"], start=ep["rgb"][0, 0],
                                        progress=not a.json))
    if a.report:
        write_world_report(result, a.report, f"alaya eval world: {a.weights}")
    out = public_json(result)
    if a.json:
        print(json.dumps({k: v for k, v in out.items() if k != "rows"}))
    else:
        for k in ("psnr_step16", "baseline_psnr_step16", "delta_psnr_actions", "idm_accuracy_real",
                  "idm_accuracy_generated", "idm_ratio", "idm_action_recall_ratio_min", "late_early_sharpness_ratio",
                  "late_early_brightness_ratio", "colour_drift", "game_late_early_sharpness_ratio",
                  "game_late_early_brightness_ratio", "game_colour_drift", f"still_psnr_step{a.still_frames}",
                  "still_sharpness_ratio"):
            if isinstance(out.get(k), (int, float)):
                print(f"{k:30s} {out[k]:.4f}")
        fitted = out["rollout_columns_fitted"] or out["skipped"]
        return _print_tail(f"fitted to the data's actions: {out['rollout_columns_fitted']}; skipped: {out['skipped']}"
                           if fitted else None, a.report and Path(a.report) / "report.md")
    return 0


def add_record_commands(sub, isub, style_names) -> None:
    """``alaya record game|gym`` and ``alaya import video``."""
    rc = sub.add_parser("record", help="record labelled gameplay episodes for the world model")
    rc.add_argument("source", choices=["game", "gym"], help="game: our arena with scripted players; "
                    "gym: any Gymnasium environment with an RGB render")
    rc.add_argument("--out", required=True, help="episodes folder (created, or appended to)")
    rc.add_argument("--env", default="CartPole-v1",
                    help="gym: the environment id; module:EnvId imports the module first (it registers "
                         "EnvId with gymnasium.register), for environments of other packages")
    rc.add_argument("--action-map", metavar="JSON",
                    help="gym: the env's Discrete actions (or MultiBinary bits) -> action rows, e.g. "
                         "'{\"0\": {\"strafe\": -1}, \"1\": {\"strafe\": 1}, \"2\": {\"jump\": 1}}'; "
                         "@FILE reads it from a file (docs/episodes.md)")
    rc.add_argument("--env-kwargs", metavar="JSON", help="gym: keyword arguments of gym.make, e.g. "
                    "'{\"max_episode_steps\": 300}' (MiniWorld: its render size defaults to --size)")
    rc.add_argument("--min-frames", type=int, default=1,
                    help="gym: discard episodes that end sooner (the next seed is played instead)")
    rc.add_argument("--episodes", type=int, default=160)
    rc.add_argument("--frames", type=int, default=300, help="frames per episode (gym: at most)")
    rc.add_argument("--size", type=int, default=64)
    rc.add_argument("--styles", nargs="+", default=["golden_sunset", "snowy_winter"], choices=style_names)
    rc.add_argument("--seed", type=int, default=0, help="first world seed (episode ep<seed>)")
    rc.add_argument("--wall-contact", type=float, default=0.0,
                    help="game: share of the walls a scripted player meets that it walks into and along "
                         "for 20-90 frames instead of turning away (0: always turns away, as before)")
    rc.add_argument("--quiet", action="store_true")
    rc.set_defaults(func=_record)
    vi = isub.add_parser("video", help="a video + per-frame camera poses -> a world-model episode "
                         "(navigation actions from pose deltas; docs/episodes.md)")
    vi.add_argument("video", help="mp4, gif, ... (anything imageio reads)")
    vi.add_argument("poses", help="CSV frame,x,y,z,qw,qx,qy,qz (camera to world) or .npy (T, 4, 4) world_to_camera")
    vi.add_argument("--out", required=True, help="episodes folder (created, or appended to)")
    vi.add_argument("--id", required=True, help="episode id")
    vi.add_argument("--size", type=int, default=64)
    vi.add_argument("--fps", type=float, default=None, help="default: the video's")
    vi.add_argument("--style", default="video", help="style name the frames are stored under")
    vi.set_defaults(func=_import_video)


def add_eval_world_command(esub) -> None:
    """``alaya eval world``."""
    ew = esub.add_parser("world", help="a world model on held-out gameplay episodes, or live (--live)")
    ew.add_argument("--data", help="episodes folder (alaya record); --live: optional, its action columns "
                    "limit the scripts and its episodes.json gives the start frames' world seeds")
    ew.add_argument("--split", default="test")
    ew.add_argument("--episodes", type=int, default=8, help="held-out episodes replayed")
    ew.add_argument("--horizon", type=int, default=16)
    ew.add_argument("--rollout-frames", type=int, default=3000, help="frames of the long rollout")
    ew.add_argument("--still-frames", type=int, default=60, help="frames of the standing-still test (not --live)")
    ew.add_argument("--weights", default=default_weights("world_model"))
    ew.add_argument("--idm", default=default_weights("inverse_dynamics"), help="inverse-dynamics model ('' to skip)")
    ew.add_argument("--size", type=int, default=None,
                    help="frame size (default: the size of the weights' start frames, the model's own)")
    ew.add_argument("--backend", default="onnx", choices=["onnx", "torch"])
    ew.add_argument("--seed", type=int, default=0)
    ew.add_argument("--report", help="folder for report.md, results.json, figures and a GIF")
    ew.add_argument("--json", action="store_true", help="print one JSON object")
    ew.add_argument("--game-reference", action="store_true",
                    help="also play the long rollout's actions in the game itself (recorded game episodes)")
    ew.add_argument("--live", action="store_true",
                    help="play scripted minutes in a session as alaya play --world does, beside the real game "
                         "from the same start frames (docs/world.md, Live evaluation); --report gets "
                         "live.json, live_minute.gif, live_sharpness.png, live_actions.png")
    ew.add_argument("--scripts", nargs="+", default=["play", "still", "walk_back"],
                    help="--live: scripts to play (play, still, walk_back)")
    ew.add_argument("--frames", type=int, default=1800,
                    help="--live: frames of the play script; shorter runs shorten every script in proportion")
    ew.add_argument("--window", type=int, default=300, help="--live: frames of a sharpness window")
    ew.add_argument("--scenes", type=int, default=None,
                    help="--live: the first N start frames of the weights (default all)")
    ew.add_argument("--seeds", type=int, default=1,
                    help="--live: play the protocol at seeds --seed ... --seed + N - 1 (each draws the play "
                         "script and the sessions' noise) and print the worst of each line, with per_seed")
    ew.add_argument("--no-action-check", action="store_true",
                    help="--live: skip the one-shot action check (each action played with and without, in "
                         "a session and in the game)")
    ew.add_argument("--predict-start-depth", action="store_true",
                    help="a memory model predicts each start frame's depth instead of starting from the "
                         "recorded one (--live: the shipped .depth.npy, as play does; replay: the episode's)")
    ew.add_argument("--start-history", type=int, default=16,
                    help="replay: action rows before each window's start frame given to the session's reset "
                         "(a jump or walk under way goes on); 0: every window starts from rest")
    ew.set_defaults(func=_eval_world)
