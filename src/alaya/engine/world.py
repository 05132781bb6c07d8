"""The physics world: a MuJoCo model of a :class:`Scene`, stepped one rendered frame at a time.

The world owns structure and dynamics; renderers read ``geom_matrices()`` each frame. Everything
random (kicks, the sweeper's path) comes from generators seeded by the scene seed, so the same
seed and the same inputs replay the same frames.
"""

from __future__ import annotations

import mujoco
import numpy as np

from alaya.engine.scene import Scene, terrain_height


class World:
    def __init__(self, scene: Scene, fps: float = 30.0, kick_rate: float = 0.6):
        self.scene = scene
        self.fps = fps
        self.model = mujoco.MjModel.from_xml_string(scene.xml)
        substeps = scene.config.physics_substeps
        self.model.opt.timestep = 1.0 / (fps * substeps)
        self.substeps = substeps
        self.data = mujoco.MjData(self.model)
        if scene.heightfield is not None:
            amp = scene.hfield_size[2]
            self.model.hfield_data[:] = (scene.heightfield / amp).ravel().astype(np.float32)
        self.geom_ids = np.array(
            [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, g.name) for g in scene.geoms]
        )
        self.rng = np.random.default_rng([scene.seed, 7919])
        self.kick_rate = kick_rate
        self.dynamic_bodies = [n for n, _ in scene.initial_velocities]
        for name, vel in scene.initial_velocities:
            jnt = self.model.joint(f"{name}_free")
            self.data.qvel[jnt.dofadr[0]: jnt.dofadr[0] + 6] = vel
        self._sweeper = self._sweeper_path()
        self._player_dof = None
        if mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "player") >= 0:
            self._player_dof = [self.model.joint(f"player_{a}").dofadr[0] for a in "xyz"]
            self._player_qpos = [self.model.joint(f"player_{a}").qposadr[0] for a in "xyz"]
        self.player_velocity = np.zeros(2)
        self.frame = 0
        mujoco.mj_forward(self.model, self.data)

    # -- dynamics ------------------------------------------------------------------------
    def _sweeper_path(self):
        if mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "sweeper") < 0:
            return None
        A = self.scene.config.arena
        centre = self.rng.uniform(-A / 2, A / 2, 2)
        angle = self.rng.uniform(0, np.pi)
        amp, omega = self.rng.uniform(1.5, A / 2), self.rng.uniform(0.4, 0.9)
        direction = np.array([np.cos(angle), np.sin(angle)])
        quat = np.array([np.cos(angle / 2), 0, 0, np.sin(angle / 2)])
        half = self.scene.hfield_size[0] if self.scene.hfield_size else 0.0
        height = terrain_height(self.scene.heightfield, half, *centre) + 0.35

        def pose(t: float):
            xy = centre + direction * amp * np.sin(omega * t)
            return np.array([xy[0], xy[1], height]), quat
        return pose

    def kick(self, body: str, delta_velocity) -> None:
        """Add a velocity change (vx, vy, vz[, wx, wy, wz]) to a dynamic body."""
        jnt = self.model.joint(f"{body}_free")
        dv = np.zeros(6)
        dv[: len(delta_velocity)] = delta_velocity
        self.data.qvel[jnt.dofadr[0]: jnt.dofadr[0] + 6] += dv

    def step(self) -> None:
        """Advance the world by one rendered frame (1 / fps seconds)."""
        if self.dynamic_bodies and self.rng.random() < self.kick_rate / self.fps:
            body = self.dynamic_bodies[self.rng.integers(len(self.dynamic_bodies))]
            self.kick(body, np.concatenate([self.rng.uniform(-3, 3, 2), self.rng.uniform(1, 4, 1)]))
        for _ in range(self.substeps):
            if self._sweeper is not None:
                pos, quat = self._sweeper(self.data.time)
                self.data.mocap_pos[0] = pos
                self.data.mocap_quat[0] = quat
            if self._player_dof is not None:
                self.data.qvel[self._player_dof[0]] = self.player_velocity[0]
                self.data.qvel[self._player_dof[1]] = self.player_velocity[1]
            mujoco.mj_step(self.model, self.data)
        self.frame += 1

    # -- player (first-person walker) --------------------------------------------------------
    @property
    def has_player(self) -> bool:
        return self._player_dof is not None

    def player_position(self) -> np.ndarray:
        if self._player_qpos is None:
            raise RuntimeError("this scene has no player body (SceneConfig.player=False)")
        body = self.model.body("player")
        return self.data.xpos[body.id].copy()

    def static_instances(self) -> set[int]:
        """Instance ids of geoms attached to the world body (they never move)."""
        body = self.model.geom_bodyid[self.geom_ids]
        return {g.instance for g, b in zip(self.scene.geoms, body) if b == 0}

    # -- rendering -------------------------------------------------------------------------
    def geom_matrices(self) -> np.ndarray:
        """(N, 4, 4) float32 local-to-world transforms of the scene's render geoms."""
        n = len(self.geom_ids)
        out = np.zeros((n, 4, 4), dtype=np.float32)
        out[:, :3, :3] = self.data.geom_xmat[self.geom_ids].reshape(n, 3, 3)
        out[:, :3, 3] = self.data.geom_xpos[self.geom_ids]
        out[:, 3, 3] = 1.0
        return out

    def ray(self, origin, direction, exclude_body: int = -1) -> float:
        """Distance along ``direction`` (unit) to the first surface, or inf."""
        geomid = np.zeros(1, dtype=np.int32)
        d = mujoco.mj_ray(self.model, self.data, np.asarray(origin, np.float64),
                          np.asarray(direction, np.float64), None, 1, exclude_body, geomid)
        return float("inf") if d < 0 else float(d)

    def ray_body(self, origin, direction, exclude_body: int = -1) -> tuple[float, int]:
        """(distance, body id) of the first surface along ``direction`` (unit), or (inf, -1).

        Body 0 is the world (terrain, walls, lamp posts); interactive pushes need to know
        which body the crosshair is on, not only how far away it is."""
        geomid = np.zeros(1, dtype=np.int32)
        d = mujoco.mj_ray(self.model, self.data, np.asarray(origin, np.float64),
                          np.asarray(direction, np.float64), None, 1, exclude_body, geomid)
        if d < 0 or geomid[0] < 0:
            return float("inf"), -1
        return float(d), int(self.model.geom_bodyid[geomid[0]])
