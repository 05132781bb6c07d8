"""Game mode: a first-person arena driven by the world model's action vector (issue #7).

``GameStream`` is an :class:`InteractiveStream` whose player walks (the camera follows the
terrain at eye height) and plays one action row per frame (``alaya.data.actions``):

* navigation: ``forward`` / ``strafe`` at ``NavigationScale.move_speed``, ``turn`` / ``pitch`` at
  its turn and pitch rates; the response is immediate (no easing), so frame t's motion is
  frame t's action;
* ``jump``: the camera leaves the ground at ``jump_speed`` and falls back under ``gravity``;
* ``attack``: a steel blade sweeps across the view for ``swing_frames`` frames, and everything
  movable within ``swing_reach`` in front of the player is knocked away;
* ``spell``: a glowing orb flies straight ahead until it touches something (or its lifetime
  ends), then bursts: it vanishes and every movable body within ``burst_radius`` is pushed
  outward, harder the closer it was;
* ``summon``: an object appears ahead of the player and falls into place.

Everything happens through MuJoCo (the blade and the orbs are real bodies, recycled from pools
parked below the arena), so the consequences are physical and the G-buffer, motion vectors and
reference renders stay consistent. ``events`` counts what the last frame's actions caused
(``EVENT_COLUMNS``). Same seed + same action rows = same frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import moderngl
import mujoco
import numpy as np

from alaya.data.actions import ACTION_DIM, NavigationScale, check_actions, one_shot
from alaya.data.episodes import EVENT_COLUMNS
from alaya.engine.camera import yaw_pitch_direction
from alaya.engine.interactive import InteractiveConfig, InteractiveStream, _PoolBody, terrain_height_smooth
from alaya.engine.scene import SceneConfig


@dataclass
class GameConfig:
    size: int = 64
    fps: float = 30.0
    navigation: NavigationScale = field(default_factory=NavigationScale)
    eye_height: float = 1.4
    max_pitch_degrees: float = 40.0
    jump_speed: float = 4.5           # m/s upward at take-off
    gravity: float = 14.0             # m/s^2 for the player's jump (snappier than 9.81)
    swing_frames: int = 6
    swing_reach: float = 2.5          # metres in front of the player an attack knocks things
    swing_cone_degrees: float = 55.0  # ... within this angle of the view heading
    swing_speed: float = 6.0          # velocity change of a knocked object, m/s
    spell_speed: float = 9.0
    spell_lifetime: int = 40          # frames before an orb that hit nothing bursts anyway
    burst_radius: float = 3.0
    burst_speed: float = 8.0          # velocity change at the burst centre, falling off linearly
    summon_pool: int = 8              # objects that summon recycles
    spell_pool: int = 3               # orbs in flight at most
    warmup_frames: int = 45
    scene: SceneConfig = field(default_factory=SceneConfig)

    def __post_init__(self):
        if self.size % 16 or self.size <= 0:
            raise ValueError(f"size must be a positive multiple of 16, got {self.size}")
        if self.swing_frames < 1 or self.spell_lifetime < 1 or self.spell_pool < 1:
            raise ValueError("swing_frames, spell_lifetime and spell_pool must be at least 1")


@dataclass
class _Orb:
    body: _PoolBody
    geom_ids: set[int]     # MuJoCo geom ids, for contact checks
    age: int = 0


class GameStream(InteractiveStream):
    """The game: ``apply(action_row)`` then ``step()`` per frame; see the module docstring."""

    def __init__(self, seed: int, config: GameConfig | None = None, ctx: moderngl.Context | None = None):
        self.game = g = config or GameConfig()
        scene = replace(g.scene, spell_pool=g.spell_pool, weapon=True)
        super().__init__(seed, InteractiveConfig(
            size=g.size, fps=g.fps, move_speed=g.navigation.move_speed, smoothing=0.0,
            eye_height=g.eye_height, min_height=0.3, max_pitch_degrees=g.max_pitch_degrees,
            pool_size=g.summon_pool, warmup_frames=g.warmup_frames, scene=scene), ctx)

    # -- lifecycle -----------------------------------------------------------------------------
    def _restart(self) -> None:
        super()._restart()
        model = self.world.model
        geom_body = model.geom_bodyid[self.world.geom_ids]

        def pool_body(name: str) -> _PoolBody:
            body = model.body(name).id
            geoms = np.flatnonzero(geom_body == body)
            return _PoolBody(name, body, geoms, 0.15, self.world.data.xpos[body].copy())

        self._orbs_free = [pool_body(n) for n in self.scene.spells]
        self._orbs: list[_Orb] = []
        self._blade = pool_body(self.scene.weapon)
        self._swing = -1                 # frame of the running swing, -1 = none
        self._jump_z, self._vz = 0.0, 0.0
        self._position[2] = self._ground() + self.game.eye_height
        self.events = np.zeros(len(EVENT_COLUMNS), np.uint8)

    def _ground(self) -> float:
        return terrain_height_smooth(self.scene, self._position[0], self._position[1])

    # -- the action row ------------------------------------------------------------------------
    @property
    def airborne(self) -> bool:
        return self._jump_z > 0.0 or self._vz > 0.0

    def apply(self, action) -> bool:
        """Play one action row (checked; an ActionError names the column). Navigation holds
        until the next row; a one-shot action starts now. True if the one-shot action did
        something (a jump in mid-air, for one, does not)."""
        row = check_actions(action, "action")
        if row.shape != (ACTION_DIM,):
            raise ValueError(f"action: one row of {ACTION_DIM} expected, got shape {row.shape}")
        self.events = np.zeros(len(EVENT_COLUMNS), np.uint8)
        forward, strafe, turn, pitch = (float(v) for v in row[:4])
        nav, dt = self.game.navigation, 1.0 / self.game.fps
        self.set_movement(forward, strafe, 0.0)
        self.look(turn * nav.turn_rate * dt, pitch * nav.pitch_rate * dt)
        act = one_shot(row)
        if act is None:
            return False
        return {"jump": self._jump, "attack": self._attack, "spell": self._cast, "summon": self._summon}[act]()

    def _jump(self) -> bool:
        if self.airborne:
            return False
        self._vz = self.game.jump_speed
        return True

    def _summon(self) -> bool:
        done = self._spawn()
        self.events[2] += done
        return done

    def _attack(self) -> bool:
        """Start a swing and knock everything movable in the cone in front of the player."""
        g = self.game
        heading = yaw_pitch_direction(self._yaw, 0.0)
        hits = 0
        for body in self._dynamic:
            offset = self.world.data.xpos[body] - self._position
            dist = float(np.linalg.norm(offset[:2]))
            if dist > g.swing_reach or dist < 1e-6 or abs(offset[2]) > 2.0:
                continue
            cos = float(offset[:2] @ heading[:2]) / dist
            if cos < math.cos(math.radians(g.swing_cone_degrees)):
                continue
            away = np.array([offset[0], offset[1], 0.0]) / dist
            self.world.kick(self._body_name(body), g.swing_speed * away + (0.0, 0.0, 0.4 * g.swing_speed))
            hits += 1
        self.events[0] += min(hits, 255)
        if self._swing < 0:
            self._swing = 0
            self._place_blade(teleport=True)
        return True

    def _cast(self) -> bool:
        """Launch an orb along the view; the oldest one in flight bursts if none is free."""
        if not self._orbs_free:
            self._burst(self._orbs[0])
        p = self._orbs_free.pop(0)
        d = self.view_direction
        room = self.world.ray(self._position, d) - 0.2
        start = self._position + d * float(np.clip(room, 0.05, 0.5))
        self._set_pose(p, start, (1.0, 0.0, 0.0, 0.0), np.concatenate([d * self.game.spell_speed, np.zeros(3)]),
                       weightless=True)
        mujoco.mj_kinematics(self.world.model, self.world.data)
        matrices = self.world.geom_matrices()
        for gi in p.geoms:
            self._teleported[int(gi)] = matrices[gi]
        self._orbs.append(_Orb(p, {int(self.world.geom_ids[gi]) for gi in p.geoms}))
        return True

    def _body_name(self, body: int) -> str:
        return self._dynamic[body]

    # -- per-frame game logic --------------------------------------------------------------------
    def _place_blade(self, teleport: bool = False) -> None:
        """The blade at its swing angle: it sweeps from 50 degrees right of the view to 50 left,
        held 0.4-1.4 m out from the eye, a little below it."""
        g = self.game
        f = self._swing / max(g.swing_frames - 1, 1)
        angle = self._yaw + math.radians(-50.0 + 100.0 * f)
        axis = np.array([math.cos(angle), math.sin(angle), -0.25])
        axis /= np.linalg.norm(axis)
        centre = self._position + 0.9 * axis
        # local z along the blade; x horizontal and perpendicular to it
        x = np.cross((0.0, 0.0, 1.0), axis)
        x /= np.linalg.norm(x)
        y = np.cross(axis, x)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, np.stack([x, y, axis], 1).reshape(-1))
        omega = math.radians(100.0) * g.fps / max(g.swing_frames - 1, 1)
        velocity = np.concatenate([omega * np.cross((0.0, 0.0, 1.0), centre - self._position), (0.0, 0.0, omega)])
        self._set_pose(self._blade, centre, quat, velocity, weightless=True)
        if teleport:
            mujoco.mj_kinematics(self.world.model, self.world.data)
            matrices = self.world.geom_matrices()
            for gi in self._blade.geoms:
                self._teleported[int(gi)] = matrices[gi]

    def _advance_swing(self) -> None:
        if self._swing < 0:
            return
        if self._swing >= self.game.swing_frames:
            self._set_pose(self._blade, self._blade.park, (1.0, 0.0, 0.0, 0.0), np.zeros(6), weightless=True)
            self._swing = -1
            return
        self._place_blade(teleport=False)
        self._swing += 1

    def _burst(self, orb: _Orb) -> None:
        g = self.game
        centre = self.world.data.xpos[orb.body.body].copy()
        hits = 0
        for body, name in self._dynamic.items():
            offset = self.world.data.xpos[body] - centre
            dist = float(np.linalg.norm(offset))
            if dist > g.burst_radius:
                continue
            direction = offset / dist if dist > 1e-6 else np.array([0.0, 0.0, 1.0])
            strength = g.burst_speed * (1.0 - dist / g.burst_radius)
            self.world.kick(name, strength * direction + (0.0, 0.0, 0.5 * strength))
            hits += 1
        self._set_pose(orb.body, orb.body.park, (1.0, 0.0, 0.0, 0.0), np.zeros(6), weightless=True)
        self._orbs.remove(orb)
        self._orbs_free.append(orb.body)
        self.events[0] = min(int(self.events[0]) + hits, 255)
        self.events[1] += 1

    def _advance_orbs(self) -> None:
        """After physics: an orb that touched anything, or outlived its time, bursts."""
        data = self.world.data
        touching = set()
        for k in range(data.ncon):
            touching.update((int(data.contact[k].geom1), int(data.contact[k].geom2)))
        for orb in list(self._orbs):
            orb.age += 1
            if orb.geom_ids & touching or orb.age >= self.game.spell_lifetime:
                self._burst(orb)

    def _move(self, dt: float) -> None:
        """Walk: horizontal movement as the interactive camera, height = terrain + eye height +
        the jump's height (a jump ends when it is back on the ground)."""
        super()._move(dt)
        if self.airborne:
            self._vz -= self.game.gravity * dt
            self._jump_z += self._vz * dt
            headroom = self.world.ray(self._position, (0.0, 0.0, 1.0)) - self.config.camera_radius
            if self._vz > 0 and self._vz * dt > headroom:
                self._vz = 0.0
            if self._jump_z <= 0.0:
                self._jump_z, self._vz = 0.0, 0.0
                self.events[3] += 1
        self._position[2] = self._ground() + self.game.eye_height + self._jump_z

    def step(self) -> dict[str, np.ndarray]:
        self._advance_swing()
        frame = super().step()
        self._advance_orbs()
        return frame
