"""An interactive first-person engine stream: a player's keys and mouse drive the camera and poke
the physics (the playable browser world, issue #6).

A server forwards held movement keys (``set_movement``), mouse deltas (``look``) and one-shot
actions (``act``); ``step()`` advances the world one frame and returns the same G-buffer dict as
:meth:`EngineStream.step`, so everything downstream (renderers, the runtime) sees ordinary frames::

    stream = InteractiveStream(seed=0, config=InteractiveConfig(size=128))
    while playing:
        stream.set_movement(forward=w - s, strafe=d - a, up=space - ctrl)   # each in [-1, 1]
        stream.look(dyaw=-mouse_dx * 0.003, dpitch=-mouse_dy * 0.003)       # radians
        if clicked:
            stream.act("push")
        frame = stream.step()
        rgb = stream.render_style("toon")

The camera is kinematic (not a MuJoCo body): rays stop it at surfaces, and it stays inside the
arena and above the terrain. Objects react through MuJoCo. Since a compiled MuJoCo model cannot
gain bodies, "spawn" and "throw" recycle a pool of spare bodies that the scene parks far below
the arena (``SceneConfig.spawn_pool``). Same seed + same calls = same frames.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace

import moderngl
import mujoco
import numpy as np

from alaya.engine.camera import look_at, yaw_pitch_direction
from alaya.engine.raster import GBufferRasterizer, create_context
from alaya.engine.reference import ReferenceRenderer, StyledStream
from alaya.engine.scene import PARK_DEPTH, GeomSpec, Scene, SceneConfig, generate_scene
from alaya.engine.world import World

ACTIONS = ("push", "throw", "spawn")
MAX_LOOK_DELTA = math.pi    # one look() call turns at most half a turn (anything more is a bug)
FALLEN_DEPTH = -20.0        # a pool body below this left the arena (thrown over a wall): park it


@dataclass
class InteractiveConfig:
    size: int = 128                  # square frames; any positive multiple of 16
    fps: float = 30.0                # one step() = 1 / fps seconds of physics and movement
    fov_y: float = 70.0
    move_speed: float = 3.0          # m/s at full input (horizontal and vertical)
    smoothing: float = 0.08          # s, time constant of the camera velocity's response (0 = none)
    eye_height: float = 1.6          # start height above the terrain, metres
    min_height: float = 0.3          # the camera stays this far above the terrain
    max_height: float = 8.0          # ... and below this height (the terrain's lowest point is 0)
    margin: float = 0.6              # distance kept from the arena's border walls
    collide: bool = True             # rays stop the camera at walls and objects
    camera_radius: float = 0.3       # how close the camera gets to a surface when colliding
    max_pitch_degrees: float = 80.0
    reach: float = 10.0              # push range, metres
    push_speed: float = 5.0          # velocity change horizontally away from the camera, m/s
    push_lift: float = 1.0           # upward velocity change of a push, m/s (makes things hop)
    throw_speed: float = 12.0        # launch speed along the view, m/s
    spawn_distance: float = 2.5      # spawned objects appear this far ahead (closer if blocked)
    spawn_height: float = 1.0        # ... and this far above the surface below them
    pool_size: int = 8               # spare bodies for spawn / throw (the oldest is recycled)
    kick_rate: float = 0.0           # random kicks per second (EngineStream's worlds use 0.6)
    warmup_frames: int = 45          # physics frames before the first one: dropped objects land
    scene: SceneConfig = field(default_factory=SceneConfig)

    def __post_init__(self):
        for name in ("fps", "move_speed", "max_pitch_degrees", "reach"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.pool_size <= 64:   # the rasterizer draws at most 128 geoms
            raise ValueError(f"pool_size must be in [0, 64], got {self.pool_size}")
        if not self.max_pitch_degrees < 90:
            raise ValueError(f"max_pitch_degrees must be below 90, got {self.max_pitch_degrees}")
        if self.smoothing < 0:
            raise ValueError(f"smoothing must be >= 0, got {self.smoothing}")


@dataclass
class _PoolBody:
    name: str
    body: int               # MuJoCo body id
    geoms: np.ndarray       # indices into scene.geoms (and the rasterizer's model matrices)
    radius: float           # bounding radius, for placing it clear of surfaces
    park: np.ndarray        # its parking spot, far below the arena


def _checked(name: str, value, bound: float) -> float:
    """``value`` as a float, or a ValueError naming the argument (servers relay it to clients)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or abs(v) > bound:
        raise ValueError(f"{name} must be a finite number in [-{bound:g}, {bound:g}], got {value!r}")
    return v


def _bounding_radius(g: GeomSpec) -> float:
    s = g.size
    if g.kind == "box":
        return math.sqrt(s[0] ** 2 + s[1] ** 2 + s[2] ** 2)
    if g.kind == "capsule":
        return s[0] + s[1]
    if g.kind == "cylinder":
        return math.hypot(s[0], s[1])
    return s[0]   # sphere


def terrain_height_smooth(scene: Scene, x: float, y: float) -> float:
    """Bilinear terrain height at (x, y): continuous, so a camera gliding at its minimum
    height does not jump from grid sample to grid sample (``terrain_height`` is nearest)."""
    h = scene.heightfield
    if h is None:
        return 0.0
    n, half = h.shape[0], scene.hfield_size[0]
    u = float(np.clip((x + half) / (2 * half) * (n - 1), 0, n - 1))
    v = float(np.clip((y + half) / (2 * half) * (n - 1), 0, n - 1))
    j, i = min(int(u), n - 2), min(int(v), n - 2)
    fu, fv = u - j, v - i
    top = h[i, j] * (1 - fu) + h[i, j + 1] * fu
    bottom = h[i + 1, j] * (1 - fu) + h[i + 1, j + 1] * fu
    return float(top * (1 - fv) + bottom * fv)


class InteractiveStream(StyledStream):
    """World + player-driven first-person camera + G-buffer rasterizer (+ reference styles)."""

    def __init__(self, seed: int, config: InteractiveConfig | None = None,
                 ctx: moderngl.Context | None = None):
        self.config = config or InteractiveConfig()
        self._owns_ctx = ctx is None
        self._ctx = ctx or create_context()
        self._closed = False
        self._build(seed)

    # -- lifecycle -----------------------------------------------------------------------------
    def _build(self, seed: int) -> None:
        cfg = self.config
        self.seed = seed
        # no walker body: the camera is kinematic; the pool exists only in interactive scenes
        scene_cfg = replace(cfg.scene, player=False, spawn_pool=cfg.pool_size)
        self.scene = generate_scene(seed, scene_cfg)
        self.raster = GBufferRasterizer(self.scene, cfg.size, cfg.size, fov_y=cfg.fov_y, ctx=self._ctx)
        self._reference: ReferenceRenderer | None = None
        self._restart()

    def _restart(self) -> None:
        """A fresh world, the start pose, no input held; the next frame has zero motion."""
        cfg = self.config
        self.world = World(self.scene, fps=cfg.fps, kick_rate=cfg.kick_rate)
        self.raster.reset()
        model = self.world.model
        geom_body = model.geom_bodyid[self.world.geom_ids]
        self._pool = []
        for name in self.scene.pool:
            body = model.body(name).id
            geoms = np.flatnonzero(geom_body == body)
            radius = max(_bounding_radius(self.scene.geoms[g]) for g in geoms)
            park = self.world.data.xpos[body].copy()
            self._pool.append(_PoolBody(name, body, geoms, radius, park))
        self._dynamic = {model.body(n).id: n for n in [*self.world.dynamic_bodies, *self.scene.pool]}
        self._pool_next = 0
        self._teleported: dict[int, np.ndarray] = {}   # geom index -> its matrix at the teleport
        self._rng = np.random.default_rng([self.seed, 6151])   # spin and orientation of spawns
        for _ in range(cfg.warmup_frames):
            self.world.step()
        self._position, self._yaw = self._start_pose()
        self._pitch = -0.1
        self._velocity = np.zeros(3)
        self._movement = np.zeros(3)     # forward, strafe, up: held until changed
        self.world_to_camera: np.ndarray | None = None
        self.frames = 0

    def _start_pose(self) -> tuple[np.ndarray, float]:
        """A seeded spot in the inner half of the arena, facing its centre, with room around."""
        A, rng = self.scene.config.arena, np.random.default_rng([self.seed, 17])
        best, best_score = None, -1.0
        for _ in range(16):
            x, y = rng.uniform(-A / 2, A / 2, 2)
            yaw = math.atan2(-y, -x)
            pos = np.array([x, y, terrain_height_smooth(self.scene, x, y) + self.config.eye_height])
            around = min(self.world.ray(pos, yaw_pitch_direction(yaw + a, 0.0))
                         for a in np.linspace(0, 2 * np.pi, 8, endpoint=False))
            ahead = self.world.ray(pos, yaw_pitch_direction(yaw, 0.0))
            score = min(around / 1.0, ahead / 3.0)
            if score > best_score:
                best, best_score = (pos, yaw), score
            if score >= 1.0:
                break
        return best

    def reset(self, seed: int | None = None) -> None:
        """Back to the start pose and a fresh world (of ``seed``, if given, else the same one).
        Held movement is released; the next frame has zero motion."""
        if seed is not None and seed != self.seed:
            self._release_renderers()
            self._build(seed)
        else:
            self._restart()

    def _release_renderers(self) -> None:
        if self._reference is not None:
            self._reference.release()
            self._reference = None
        self.raster.release()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release_renderers()
        if self._owns_ctx:
            self._ctx.release()

    # -- player input --------------------------------------------------------------------------
    def set_movement(self, forward: float = 0.0, strafe: float = 0.0, up: float = 0.0) -> None:
        """Held movement input, each in [-1, 1]: forward along the view's heading, strafe to
        the right, up along world z. It stays in effect until the next call."""
        self._movement = np.array([_checked("forward", forward, 1.0), _checked("strafe", strafe, 1.0),
                                   _checked("up", up, 1.0)])

    def look(self, dyaw: float = 0.0, dpitch: float = 0.0) -> None:
        """Turn by radians (positive yaw turns left, positive pitch looks up); accumulated,
        pitch clamped to ±``max_pitch_degrees``. Takes effect at the next ``step``."""
        dyaw, dpitch = _checked("dyaw", dyaw, MAX_LOOK_DELTA), _checked("dpitch", dpitch, MAX_LOOK_DELTA)
        self._yaw = math.remainder(self._yaw + dyaw, 2 * math.pi)
        limit = math.radians(self.config.max_pitch_degrees)
        self._pitch = float(np.clip(self._pitch + dpitch, -limit, limit))

    def act(self, action: str) -> bool:
        """Do a one-shot action now; True if something happened (a push can miss)."""
        if not isinstance(action, str) or action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; valid actions: {', '.join(ACTIONS)}")
        return {"push": self._push, "throw": self._throw, "spawn": self._spawn}[action]()

    # -- read-only state -----------------------------------------------------------------------
    @property
    def camera_position(self) -> np.ndarray:
        return self._position.copy()

    @property
    def yaw(self) -> float:
        return self._yaw

    @property
    def pitch(self) -> float:
        return self._pitch

    @property
    def view_direction(self) -> np.ndarray:
        return yaw_pitch_direction(self._yaw, self._pitch)

    @property
    def K(self) -> np.ndarray:
        return self.raster.K

    # -- actions -------------------------------------------------------------------------------
    def _push(self) -> bool:
        d = self.view_direction
        dist, body = self.world.ray_body(self._position, d)
        if dist > self.config.reach or body not in self._dynamic:
            return False
        # horizontally away (|pitch| < 90 deg, so this is defined): a push seen from above
        # should slide the object, not press it into the ground
        away = np.array([d[0], d[1], 0.0]) / math.hypot(d[0], d[1])
        self.world.kick(self._dynamic[body], self.config.push_speed * away + (0.0, 0.0, self.config.push_lift))
        return True

    def _throw(self) -> bool:
        if not self._pool:
            return False
        p = self._next_pool_body()
        d = self.view_direction
        room = self.world.ray(self._position, d) - p.radius - 0.05
        start = self._position + d * float(np.clip(room, 0.2, p.radius + 0.4))
        velocity = d * self.config.throw_speed + self._velocity
        self._teleport(p, start, np.concatenate([velocity, self._rng.normal(0.0, 3.0, 3)]))
        return True

    def _spawn(self) -> bool:
        if not self._pool:
            return False
        p = self._next_pool_body()
        ahead = yaw_pitch_direction(self._yaw, 0.0)
        room = self.world.ray(self._position, ahead) - p.radius - 0.1
        dist = max(min(self.config.spawn_distance, room), p.radius + 0.2)
        lim = self.scene.config.arena - 0.3 - p.radius
        x, y = np.clip(self._position[:2] + ahead[:2] * dist, -lim, lim)
        # above whatever lies below that spot at eye level (terrain, a table), not inside it
        ground = terrain_height_smooth(self.scene, x, y)
        below = self.world.ray((x, y, self._position[2]), (0.0, 0.0, -1.0))
        surface = max(self._position[2] - below, ground) if math.isfinite(below) else ground
        start = np.array([x, y, surface + self.config.spawn_height + p.radius])
        self._teleport(p, start, np.zeros(6))
        return True

    def _next_pool_body(self) -> _PoolBody:
        """Round robin: unused spares first, then the longest-lived one comes back."""
        p = self._pool[self._pool_next]
        self._pool_next = (self._pool_next + 1) % len(self._pool)
        return p

    def _teleport(self, p: _PoolBody, position: np.ndarray, velocity: np.ndarray) -> None:
        """Put a pool body at ``position`` (random orientation) with a 6-d velocity, under
        gravity, and remember its new pose as its previous-frame pose for motion vectors."""
        q = self._rng.normal(size=4)
        self._set_pose(p, position, q / np.linalg.norm(q), velocity, weightless=False)
        mujoco.mj_kinematics(self.world.model, self.world.data)
        matrices = self.world.geom_matrices()
        for g in p.geoms:
            self._teleported[int(g)] = matrices[g]

    def _set_pose(self, p: _PoolBody, position, quat, velocity, weightless: bool) -> None:
        model, data = self.world.model, self.world.data
        jnt = model.joint(f"{p.name}_free")
        data.qpos[jnt.qposadr[0]: jnt.qposadr[0] + 7] = np.concatenate([position, quat])
        data.qvel[jnt.dofadr[0]: jnt.dofadr[0] + 6] = velocity
        model.body_gravcomp[p.body] = 1.0 if weightless else 0.0   # parked ones float, others fall

    def _park_fallen(self) -> None:
        """Bodies thrown out of the arena would fall forever: park them again."""
        for p in self._pool:
            if PARK_DEPTH + 1.0 < self.world.data.xpos[p.body][2] < FALLEN_DEPTH:
                self._set_pose(p, p.park, (1.0, 0.0, 0.0, 0.0), np.zeros(6), weightless=True)

    # -- simulation ----------------------------------------------------------------------------
    def _move(self, dt: float) -> None:
        """Integrate the camera over ``dt``: velocity eases towards the input (exponentially, so
        the response is the same at any fps), then collisions and bounds."""
        cfg = self.config
        horizontal = self._movement[:2]
        norm = float(np.linalg.norm(horizontal))
        if norm > 1.0:                      # diagonal keys are not faster
            horizontal = horizontal / norm
        c, s = math.cos(self._yaw), math.sin(self._yaw)
        target = cfg.move_speed * np.array([horizontal[0] * c + horizontal[1] * s,
                                            horizontal[0] * s - horizontal[1] * c, self._movement[2]])
        ease = 1.0 if cfg.smoothing == 0 else 1.0 - math.exp(-dt / cfg.smoothing)
        self._velocity += ease * (target - self._velocity)
        self._velocity[np.abs(self._velocity) < 1e-3] = 0.0   # come to an exact stop
        delta = self._velocity * dt
        for axis in range(3):
            if delta[axis] == 0.0 or not cfg.collide:
                continue
            direction = np.zeros(3)
            direction[axis] = math.copysign(1.0, delta[axis])
            room = max(self.world.ray(self._position, direction) - cfg.camera_radius, 0.0)
            if abs(delta[axis]) > room:
                delta[axis], self._velocity[axis] = direction[axis] * room, 0.0
        lim = self.scene.config.arena - cfg.margin
        pos = self._position + delta
        pos[:2] = np.clip(pos[:2], -lim, lim)
        pos[2] = np.clip(pos[2], terrain_height_smooth(self.scene, pos[0], pos[1]) + cfg.min_height,
                         max(cfg.max_height, cfg.min_height))
        self._velocity[pos != self._position + delta] = 0.0
        self._position = pos

    def _view(self) -> np.ndarray:
        return look_at(self._position, self._position + self.view_direction)

    def step(self) -> dict[str, np.ndarray]:
        """Advance one frame (1 / fps s): move the camera, step physics, rasterize. Returns the
        G-buffer arrays of the frame plus ``world_to_camera`` and ``K``, as ``EngineStream.step``."""
        self._move(1.0 / self.config.fps)
        self._park_fallen()
        self.world.step()
        geoms = self.world.geom_matrices()
        view = self._view()
        if self._teleported:   # spawned bodies move from where they appeared, not from the park
            self.raster.replace_previous_models(np.array(list(self._teleported)),
                                                np.stack(list(self._teleported.values())))
            self._teleported.clear()
        frame = self.raster.render(geoms, view)
        self.world_to_camera = view
        self.frames += 1
        frame["world_to_camera"] = view.astype(np.float32)
        frame["K"] = self.K.astype(np.float32)
        return frame
