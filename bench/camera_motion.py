"""Learned camera motion against recorded poses and against the fixed constants.

    python bench/camera_motion.py --data /work/data/motion64 --weights runs/motion_sup [--scale-from DATA]
    python bench/camera_motion.py --miniworld-poses /work/data/maze64 --out /work/data/maze64_poses

The first form prints ``alaya.train.camera_motion_eval.evaluate_motion`` on the test split
(per-frame rotation error in degrees, translation error in m; the model played freely from each
episode's first pose, the constants from the recorded camera's up). ``--scale-from`` (a dataset
with poses): also the translations scaled by the least-squares factor fitted on its train split,
for a model trained from frames alone (which learns translation up to scale).

The second form is for measurement only: a MiniWorld recording (``alaya record gym``) has no
poses, so this replays each episode (its seed and raw ``env_action``s, deterministic) and writes
a copy with the agent's true camera (``world_to_camera`` of its position, heading and eye height,
pitch 0, in a z-up world) and K (its vertical field of view) that the first form can read.
Training never sees these poses.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def miniworld_view(pos: np.ndarray, direction: float, height: float) -> np.ndarray:
    """(4, 4) GL world_to_camera of a MiniWorld agent (x, y up, z; heading ``direction``, left +)
    in a z-up world (x, -z, y)."""
    from alaya.models.camera_geometry import GL_TO_CV
    from alaya.models.view_warp import camera_rotation
    R = GL_TO_CV @ camera_rotation(torch.tensor([direction]), torch.zeros(1))[0].double().float()
    c = torch.tensor([pos[0], -pos[2], height], dtype=torch.float32)
    out = torch.eye(4)
    out[:3, :3] = R
    out[:3, 3] = -R @ c
    return out.numpy()


def miniworld_poses(src: str, dst: str) -> None:
    from alaya.data.episodes import EpisodeDataset, write_episode
    from alaya.data.gym_adapter import make_env
    ds = EpisodeDataset(src)
    gen = ds.meta.generator
    env = make_env("miniworld:" + gen["env_id"], gen.get("env_kwargs") or {})
    Path(dst, "episodes").mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(src, "episodes.json"), Path(dst, "episodes.json"))
    for eid in ds.ids():
        ep = dict(ds.load(eid))
        env.reset(seed=ds.meta.episodes[eid]["seed"])
        agent = env.unwrapped.agent
        poses = [miniworld_view(agent.pos, agent.dir, agent.cam_height)]
        for a in ep["env_action"][1:]:
            env.step(int(a[0]))
            poses.append(miniworld_view(agent.pos, agent.dir, agent.cam_height))
        H = ep["rgb"].shape[2]
        f = 0.5 * H / math.tan(math.radians(agent.cam_fov_y) / 2)
        ep["world_to_camera"] = np.stack(poses).astype(np.float32)
        ep["K"] = np.array([[f, 0, H / 2], [0, f, H / 2], [0, 0, 1]], np.float32)
        write_episode(Path(dst, "episodes", f"{eid}.npz"), ep)
    env.close()
    print(f"wrote {len(ds.ids())} episodes with the agent's true camera into {dst}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data")
    ap.add_argument("--weights")
    ap.add_argument("--split", default="test")
    ap.add_argument("--scale-from")
    ap.add_argument("--miniworld-poses", metavar="RECORDING")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    if a.miniworld_poses:
        miniworld_poses(a.miniworld_poses, a.out)
        return
    from alaya.models.camera_motion import CameraMotion
    from alaya.train.camera_motion_eval import evaluate_motion
    result = evaluate_motion(CameraMotion.from_pretrained(a.weights), a.data, a.split, scale_from=a.scale_from)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
