"""Camera rigs: orbit, smooth fly-through and a first-person walker that collides with the world.

A rig is driven once per frame: ``control(world)`` before the physics step (the walker steers
its body), ``view(world)`` after it, returning the OpenGL world-to-camera matrix.
"""

from __future__ import annotations

import math

import numpy as np

from alaya.engine.world import World

RIGS = ("orbit", "fly", "walk")


def _cross(a, b) -> tuple[float, float, float]:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _unit(v) -> tuple[float, float, float]:
    n = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    return (v[0] / n, v[1] / n, v[2] / n)


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenGL view matrix: the camera at ``eye`` looks down -z towards ``target``, y up."""
    ex, ey, ez = (float(c) for c in eye)
    f = _unit((float(target[0]) - ex, float(target[1]) - ey, float(target[2]) - ez))
    r = _cross(f, up)
    if r[0] * r[0] + r[1] * r[1] + r[2] * r[2] < 1e-12:   # looking straight up or down
        r = _cross(f, (0.0, 1.0, 0.0))
    r = _unit(r)
    u = _cross(r, f)
    return np.array([
        [r[0], r[1], r[2], -(r[0] * ex + r[1] * ey + r[2] * ez)],
        [u[0], u[1], u[2], -(u[0] * ex + u[1] * ey + u[2] * ez)],
        [-f[0], -f[1], -f[2], f[0] * ex + f[1] * ey + f[2] * ez],
        [0.0, 0.0, 0.0, 1.0],
    ])


def yaw_pitch_direction(yaw: float, pitch: float) -> np.ndarray:
    return np.array([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)])


class OrbitRig:
    """Circles a point of the arena at a fixed radius and height, looking at it."""

    def __init__(self, rng: np.random.Generator, arena: float):
        self.centre = np.array([*rng.uniform(-arena / 3, arena / 3, 2), rng.uniform(0.0, 0.8)])
        self.radius = rng.uniform(3.5, arena - 1.0)
        self.height = rng.uniform(2.5, 6.0)     # mostly above the free-standing walls
        self.speed = rng.choice([-1, 1]) * rng.uniform(0.15, 0.45)   # rad / s
        self.phase = rng.uniform(0, 2 * np.pi)

    def control(self, world: World) -> None:
        pass

    def view(self, world: World) -> np.ndarray:
        a = self.phase + self.speed * world.data.time
        eye = self.centre + np.array([self.radius * np.cos(a), self.radius * np.sin(a), self.height])
        return look_at(eye, self.centre)


class FlyRig:
    """Glides along a closed Catmull-Rom spline through random waypoints, looking ahead."""

    def __init__(self, rng: np.random.Generator, arena: float, waypoints: int = 6):
        angles = np.sort(rng.uniform(0, 2 * np.pi, waypoints))
        radii = rng.uniform(0.3, 0.85, waypoints) * arena
        self.points = np.stack([radii * np.cos(angles), radii * np.sin(angles),
                                rng.uniform(1.5, 4.0, waypoints)], -1)
        seg = np.linalg.norm(np.roll(self.points, -1, 0) - self.points, axis=1)
        self.seconds_per_segment = seg / rng.uniform(1.5, 3.0)
        self.offset = rng.uniform(0, self.seconds_per_segment.sum())

    def position(self, t: float) -> np.ndarray:
        period = self.seconds_per_segment.sum()
        t = (t + self.offset) % period
        ends = np.cumsum(self.seconds_per_segment)
        i = int(np.searchsorted(ends, t, side="right"))
        i = min(i, len(ends) - 1)
        start = ends[i] - self.seconds_per_segment[i]
        s = (t - start) / self.seconds_per_segment[i]
        n = len(self.points)
        p0, p1, p2, p3 = (self.points[(i + k) % n] for k in (-1, 0, 1, 2))
        return 0.5 * ((2 * p1) + (-p0 + p2) * s + (2 * p0 - 5 * p1 + 4 * p2 - p3) * s * s
                      + (-p0 + 3 * p1 - 3 * p2 + p3) * s ** 3)

    def control(self, world: World) -> None:
        pass

    def view(self, world: World) -> np.ndarray:
        t = world.data.time
        eye = self.position(t)
        target = self.position(t + 1.0)
        target = target + np.array([0.0, 0.0, -0.6])
        if np.linalg.norm(target - eye) < 1e-3:
            target = eye + np.array([1.0, 0.0, -0.3])
        return look_at(eye, target)


class WalkRig:
    """First-person walker: steers the world's player body (physics does the collisions).

    An internal scripted policy wanders: it keeps walking, turns smoothly at random and turns
    away when a ray cast ahead meets a wall or an object. ``commands`` can override it with
    (forward m/s, strafe m/s, turn rad/s, pitch rad) per frame.
    """

    eye_height = 0.55   # above the player body's centre

    def __init__(self, rng: np.random.Generator, speed: float = 1.8):
        self.rng = rng
        self.speed = speed
        self.yaw = rng.uniform(-np.pi, np.pi)
        self.pitch = -0.1
        self.turn = 0.0
        self.avoid_side = 0.0
        self.command: tuple[float, float, float, float] | None = None

    def control(self, world: World) -> None:
        if not world.has_player:
            raise RuntimeError("the walk rig needs a scene built with SceneConfig(player=True)")
        dt = 1.0 / world.fps
        if self.command is not None:
            forward, strafe, turn, self.pitch = self.command
        else:
            self.turn = 0.9 * self.turn + 0.1 * self.rng.normal(0.0, 1.2)
            origin = world.player_position() + (0, 0, self.eye_height - 0.4)
            player = world.model.body("player").id
            left, ahead, right = (world.ray(origin, yaw_pitch_direction(self.yaw + a, 0.0), player)
                                  for a in (0.6, 0.0, -0.6))
            clearance = min(left, ahead, right)
            forward, strafe = self.speed * float(np.clip((clearance - 0.6) / 1.5, 0.0, 1.0)), 0.0
            # steer away from the nearer obstacle, harder the closer it is; keep the chosen
            # side until the way is clear (no dithering between two equal sides)
            avoid = 3.0 * float(np.clip((2.5 - clearance) / 2.0, 0.0, 1.0))
            if avoid == 0.0:
                self.avoid_side = 0.0
            elif self.avoid_side == 0.0:
                self.avoid_side = 1.0 if left >= right else -1.0
            turn = self.turn + avoid * self.avoid_side
            self.pitch = -0.1 + 0.05 * np.sin(world.data.time * 0.7)
        self.yaw += turn * dt
        fwd = np.array([np.cos(self.yaw), np.sin(self.yaw)])
        side = np.array([np.sin(self.yaw), -np.cos(self.yaw)])
        world.player_velocity = forward * fwd + strafe * side

    def view(self, world: World) -> np.ndarray:
        eye = world.player_position() + np.array([0.0, 0.0, self.eye_height])
        return look_at(eye, eye + yaw_pitch_direction(self.yaw, self.pitch))


def make_rig(name: str, rng: np.random.Generator, arena: float):
    if name == "orbit":
        return OrbitRig(rng, arena)
    if name == "fly":
        return FlyRig(rng, arena)
    if name == "walk":
        return WalkRig(rng)
    raise ValueError(f"unknown camera rig {name!r}; choose from {RIGS}")
