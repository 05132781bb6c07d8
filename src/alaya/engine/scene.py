"""Procedural scenes: a seed becomes a MuJoCo world (MJCF) plus what the rasterizer needs.

World frame: z up, metres. A scene is an arena of half-size ``arena`` with a height-field
terrain (or flat ground), walls, ramps, dynamic boxes/spheres/capsules/cylinders dropped from
above, composite props (tables, dumbbells, crosses, lamp posts), glowing emissive props and a
kinematic sweeper that pushes things around.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from alaya.engine.materials import (
    EMISSIVE_MATERIALS, GROUND_MATERIALS, MATERIAL_IDS, PROP_MATERIALS, WALL_MATERIALS,
)


@dataclass
class SceneConfig:
    arena: float = 8.0               # half-size of the playable square, metres
    terrain_amplitude: float = 0.5   # peak height of terrain bumps, metres (0 = flat)
    hfield_resolution: int = 21      # height-field grid points per side
    walls: tuple[int, int] = (1, 3)  # free-standing walls (the border is always walled)
    ramps: tuple[int, int] = (1, 3)
    dynamic_objects: tuple[int, int] = (8, 16)
    composite_props: tuple[int, int] = (2, 4)
    emissive_props: tuple[int, int] = (1, 3)
    sweeper: bool = True
    player: bool = False             # a collidable walker body for first-person rigs
    physics_substeps: int = 3        # physics steps per rendered frame (90 Hz at 30 FPS)
    spawn_pool: int = 0              # parked spare bodies for interactive spawning (0 = none)
    spell_pool: int = 0              # parked glowing orbs for the game's spells (0 = none)
    weapon: bool = False             # a parked blade for the game's attack swing


@dataclass
class GeomSpec:
    """One renderable geom: MuJoCo type name, MuJoCo size triple, material and instance."""
    name: str
    kind: str                  # "box" | "sphere" | "capsule" | "cylinder" | "hfield"
    size: tuple[float, ...]
    material: int
    instance: int


@dataclass
class Scene:
    seed: int
    config: SceneConfig
    xml: str
    geoms: list[GeomSpec]
    heightfield: np.ndarray | None        # (n, n) elevations in metres, row = y, col = x
    hfield_size: tuple[float, float, float, float] | None
    instances: dict[int, str] = field(default_factory=dict)  # instance id -> description
    initial_velocities: list[tuple[str, np.ndarray]] = field(default_factory=list)  # body -> 6-d
    pool: list[str] = field(default_factory=list)   # parked spare bodies (SceneConfig.spawn_pool)
    spells: list[str] = field(default_factory=list)  # parked spell orbs (SceneConfig.spell_pool)
    weapon: str | None = None                        # the parked blade (SceneConfig.weapon)


def _fmt(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def terrain_height(heights: np.ndarray | None, half: float, x: float, y: float) -> float:
    """Height of the nearest height-field sample at (x, y); 0 for flat ground."""
    if heights is None:
        return 0.0
    n = heights.shape[0]
    i = int(np.clip(round((y + half) / (2 * half) * (n - 1)), 0, n - 1))
    j = int(np.clip(round((x + half) / (2 * half) * (n - 1)), 0, n - 1))
    return float(heights[i, j])


def _terrain(rng: np.random.Generator, n: int, arena: float, amplitude: float) -> np.ndarray:
    """Smooth rolling terrain from a few random Gaussian bumps and waves, lowest point 0."""
    xs = np.linspace(-arena - 2, arena + 2, n)
    gx, gy = np.meshgrid(xs, xs)   # rows = y, cols = x
    h = np.zeros_like(gx)
    for _ in range(rng.integers(3, 7)):
        cx, cy = rng.uniform(-arena, arena, 2)
        s = rng.uniform(1.5, 4.0)
        h += rng.uniform(-1.0, 1.0) * np.exp(-((gx - cx) ** 2 + (gy - cy) ** 2) / (2 * s * s))
    kx, ky = rng.uniform(0.2, 0.6, 2)
    h += 0.3 * np.sin(kx * gx + rng.uniform(0, 6.28)) * np.cos(ky * gy + rng.uniform(0, 6.28))
    h -= h.min()
    peak = max(float(h.max()), 1e-6)
    return (h / peak * amplitude).astype(np.float64)


class _Builder:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.geoms: list[GeomSpec] = []
        self.instances: dict[int, str] = {}
        self.body_xml: list[str] = []
        self.static_xml: list[str] = []
        self.next_instance = 1
        self.initial_velocities: list[tuple[str, np.ndarray]] = []

    def instance(self, description: str) -> int:
        iid = self.next_instance
        self.next_instance += 1
        self.instances[iid] = description
        return iid

    def geom(self, kind: str, size, material: str, instance: int, pos=(0, 0, 0),
             euler=(0, 0, 0), extra: str = "") -> str:
        name = f"g{len(self.geoms)}"
        mid = MATERIAL_IDS[material]
        self.geoms.append(GeomSpec(name, kind, tuple(float(s) for s in size), mid, instance))
        return (f'<geom name="{name}" type="{kind}" size="{_fmt(size)}" pos="{_fmt(pos)}" '
                f'euler="{_fmt(euler)}" {extra}/>')


def _dynamic_body(b: _Builder, name: str, pos, geoms_xml: list[str], vel) -> None:
    b.body_xml.append(
        f'<body name="{name}" pos="{_fmt(pos)}"><freejoint name="{name}_free"/>'
        + "".join(geoms_xml) + "</body>"
    )
    b.initial_velocities.append((name, np.asarray(vel, dtype=np.float64)))


def generate_scene(seed: int, config: SceneConfig | None = None) -> Scene:
    """Build the scene for ``seed``. The same seed and config always give the same scene."""
    cfg = config or SceneConfig()
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    A = cfg.arena
    ground_mat = str(rng.choice(GROUND_MATERIALS))

    # Ground: a height field (or a thick flat box when the amplitude is zero).
    heights, hsize = None, None
    ground = b.instance("ground")
    if cfg.terrain_amplitude > 0:
        n = cfg.hfield_resolution
        heights = _terrain(rng, n, A, cfg.terrain_amplitude)
        hsize = (A + 2, A + 2, max(cfg.terrain_amplitude, 1e-3), 0.5)
        b.static_xml.append(b.geom("hfield", (0, 0, 0), ground_mat, ground, extra='hfield="terrain"'))
    else:
        b.static_xml.append(b.geom("box", (A + 2, A + 2, 0.5), ground_mat, ground, pos=(0, 0, -0.5)))

    def ground_height(x: float, y: float) -> float:
        return terrain_height(heights, A + 2, x, y)

    # The border: four walls of random height and material close the arena.
    for k, (x, y, yaw) in enumerate([(0, A, 0), (0, -A, 0), (A, 0, 90), (-A, 0, 90)]):
        height = rng.uniform(0.8, 2.5)
        base = min(ground_height(x + dx, y + dy) for dx, dy in
                   ((0, 0), (A * (yaw == 0), A * (yaw != 0)), (-A * (yaw == 0), -A * (yaw != 0))))
        top = max(ground_height(x + dx, y + dy) for dx, dy in
                  ((0, 0), (A * (yaw == 0), A * (yaw != 0)), (-A * (yaw == 0), -A * (yaw != 0))))
        z0, z1 = base - 0.3, top + height
        b.static_xml.append(b.geom("box", (A + 0.25, 0.25, (z1 - z0) / 2), str(rng.choice(WALL_MATERIALS)),
                                   b.instance(f"border wall {k}"), pos=(x, y, (z0 + z1) / 2),
                                   euler=(0, 0, yaw)))
    # Free-standing walls inside.
    for k in range(rng.integers(*cfg.walls, endpoint=True)):
        mat = str(rng.choice(WALL_MATERIALS))
        length, height, thick = rng.uniform(2, A), rng.uniform(1.0, 3.0), rng.uniform(0.2, 0.5)
        x, y, yaw = rng.uniform(-A + 2, A - 2), rng.uniform(-A + 2, A - 2), rng.uniform(0, 180)
        z = ground_height(x, y) + height / 2 - 0.3
        b.static_xml.append(b.geom("box", (length / 2, thick / 2, height / 2 + 0.3), mat,
                                   b.instance(f"wall {k}"), pos=(x, y, z), euler=(0, 0, yaw)))

    # Ramps: tilted static slabs things can roll down.
    for k in range(rng.integers(*cfg.ramps, endpoint=True)):
        x, y = rng.uniform(-A + 2, A - 2, 2)
        pitch, yaw = rng.uniform(12, 25), rng.uniform(0, 360)
        L, Wd = rng.uniform(1.5, 3.0), rng.uniform(0.8, 1.6)
        z = ground_height(x, y) + L * np.sin(np.radians(pitch)) / 2
        b.static_xml.append(b.geom("box", (L, Wd, 0.1), str(rng.choice(WALL_MATERIALS + ("steel",))),
                                   b.instance(f"ramp {k}"), pos=(x, y, z), euler=(0, pitch, yaw)))

    def drop_pos(margin=1.0):
        x, y = rng.uniform(-A + margin, A - margin, 2)
        return (x, y, ground_height(x, y) + rng.uniform(1.0, 4.0))

    def velocity():
        return np.concatenate([rng.uniform(-2, 2, 2), [0], rng.uniform(-3, 3, 3)])

    # Dynamic primitives.
    for k in range(rng.integers(*cfg.dynamic_objects, endpoint=True)):
        kind = str(rng.choice(["box", "sphere", "capsule", "cylinder"], p=[0.35, 0.3, 0.2, 0.15]))
        mat = str(rng.choice(PROP_MATERIALS))
        size = {"box": rng.uniform(0.15, 0.5, 3), "sphere": rng.uniform(0.15, 0.45, 1),
                "capsule": (rng.uniform(0.1, 0.25), rng.uniform(0.15, 0.5)),
                "cylinder": (rng.uniform(0.15, 0.35), rng.uniform(0.15, 0.4))}[kind]
        iid = b.instance(f"{kind} {k}")
        g = b.geom(kind, size, mat, iid, euler=rng.uniform(0, 180, 3))
        _dynamic_body(b, f"obj{k}", drop_pos(), [g], velocity())

    # Composite props: several geoms on one body, one instance.
    for k in range(rng.integers(*cfg.composite_props, endpoint=True)):
        kind = str(rng.choice(["table", "dumbbell", "cross"]))
        iid = b.instance(f"{kind} {k}")
        m1, m2 = str(rng.choice(PROP_MATERIALS)), str(rng.choice(PROP_MATERIALS))
        if kind == "table":
            w, d, h = rng.uniform(0.5, 0.9), rng.uniform(0.4, 0.7), rng.uniform(0.4, 0.7)
            parts = [b.geom("box", (w, d, 0.04), m1, iid, pos=(0, 0, h))]
            parts += [b.geom("box", (0.04, 0.04, h / 2), m2, iid, pos=(sx * (w - 0.06), sy * (d - 0.06), h / 2))
                      for sx in (-1, 1) for sy in (-1, 1)]
        elif kind == "dumbbell":
            r, L = rng.uniform(0.15, 0.3), rng.uniform(0.3, 0.6)
            parts = [b.geom("capsule", (0.05, L), m2, iid, euler=(0, 90, 0)),
                     b.geom("sphere", (r,), m1, iid, pos=(-L, 0, 0)),
                     b.geom("sphere", (r,), m1, iid, pos=(L, 0, 0))]
        else:
            s = rng.uniform(0.3, 0.6)
            parts = [b.geom("box", (s, 0.08, 0.08), m1, iid), b.geom("box", (0.08, s, 0.08), m1, iid),
                     b.geom("box", (0.08, 0.08, s), m2, iid)]
        _dynamic_body(b, f"prop{k}", drop_pos(1.5), parts, velocity() * 0.5)

    # Emissive props: glowing lamp posts (static) and glowing orbs (dynamic).
    for k in range(rng.integers(*cfg.emissive_props, endpoint=True)):
        emat = str(rng.choice(EMISSIVE_MATERIALS))
        iid = b.instance(f"glow {k}")
        if rng.random() < 0.5:
            x, y = rng.uniform(-A + 1, A - 1, 2)
            h = rng.uniform(1.5, 2.5)
            z0 = ground_height(x, y)
            b.static_xml.append(b.geom("cylinder", (0.06, h / 2), "steel", iid, pos=(x, y, z0 + h / 2)))
            b.static_xml.append(b.geom("sphere", (0.2,), emat, iid, pos=(x, y, z0 + h + 0.15)))
        else:
            r = float(rng.uniform(0.18, 0.3))
            g = b.geom(str(rng.choice(["sphere", "box"])), (r, r, r), emat, iid)
            _dynamic_body(b, f"orb{k}", drop_pos(), [g], velocity())

    # A kinematic sweeper (mocap) that pushes objects back and forth.
    mocap_xml = ""
    if cfg.sweeper:
        iid = b.instance("sweeper")
        g = b.geom("box", (0.15, 1.2, 0.35), "yellow_paint", iid)
        mocap_xml = f'<body name="sweeper" mocap="true" pos="0 0 0.35">{g}</body>'

    player_xml = ""
    if cfg.player:
        x, y = rng.uniform(-A / 2, A / 2, 2)
        player_xml = (
            f'<body name="player" pos="{_fmt((x, y, ground_height(x, y) + 1.0))}">'
            '<joint name="player_x" type="slide" axis="1 0 0" damping="0"/>'
            '<joint name="player_y" type="slide" axis="0 1 0" damping="0"/>'
            '<joint name="player_z" type="slide" axis="0 0 1" damping="0"/>'
            '<geom name="player" type="capsule" size="0.3 0.5" mass="70" friction="0.02 0.005 0.0001"/>'
            "</body>"
        )

    pool = _spawn_pool(b, seed, cfg.spawn_pool)
    spells, weapon = _game_bodies(b, cfg.spell_pool, cfg.weapon, start=len(pool))

    dt = 1.0 / (30.0 * cfg.physics_substeps)
    asset = ""
    if heights is not None:
        n = heights.shape[0]
        asset = f'<asset><hfield name="terrain" nrow="{n}" ncol="{n}" size="{_fmt(hsize)}"/></asset>'
    xml = (
        f'<mujoco model="alaya_scene_{seed}">'
        f'<option timestep="{dt:.9g}" integrator="implicitfast"/>'
        f"{asset}<worldbody>" + "".join(b.static_xml) + mocap_xml + player_xml
        + "".join(b.body_xml) + "</worldbody></mujoco>"
    )
    return Scene(seed, cfg, xml, b.geoms, heights, hsize, b.instances, b.initial_velocities, pool,
                 spells, weapon)


PARK_DEPTH = -500.0   # parked pool bodies sit here: beyond the rasterizer's far plane, touching nothing


def _spawn_pool(b: _Builder, seed: int, count: int) -> list[str]:
    """Reserve ``count`` spare dynamic bodies, parked far below the arena and weightless.

    MuJoCo cannot add bodies to a compiled model, so interactive streams teleport these into
    view (and switch their gravity compensation off) to spawn or throw objects. They draw from
    their own generator and come after every other body and geom, so a scene without a pool is
    byte-identical to what it was before pools existed, and a pool never moves an existing
    geom's index or instance id.
    """
    rng = np.random.default_rng([seed, 4243])
    names = []
    for k in range(count):
        kind = ("box", "sphere", "capsule", "cylinder")[k % 4]
        size = {"box": rng.uniform(0.15, 0.3, 3), "sphere": rng.uniform(0.18, 0.3, 1),
                "capsule": (rng.uniform(0.1, 0.18), rng.uniform(0.15, 0.3)),
                "cylinder": (rng.uniform(0.15, 0.25), rng.uniform(0.15, 0.3))}[kind]
        g = b.geom(kind, size, str(rng.choice(PROP_MATERIALS)), b.instance(f"pool {kind} {k}"))
        name = f"pool{k}"
        b.body_xml.append(f'<body name="{name}" pos="{_fmt((3.0 * k, 0.0, PARK_DEPTH))}" gravcomp="1">'
                          f'<freejoint name="{name}_free"/>{g}</body>')
        names.append(name)
    return names


def _game_bodies(b: _Builder, spells: int, weapon: bool, start: int) -> tuple[list[str], str | None]:
    """The game mode's parked bodies, after the spawn pool (so, as with the pool, scenes without
    them are unchanged): ``spells`` glowing orbs (lava, emissive) and a steel blade. They are
    fixed shapes, no random draws."""
    names = []
    for k in range(spells):
        g = b.geom("sphere", (0.14,), "lava", b.instance(f"spell orb {k}"), extra='density="300"')
        name = f"spell{k}"
        b.body_xml.append(f'<body name="{name}" pos="{_fmt((3.0 * (start + k), 3.0, PARK_DEPTH))}" '
                          f'gravcomp="1"><freejoint name="{name}_free"/>{g}</body>')
        names.append(name)
    blade = None
    if weapon:
        g = b.geom("box", (0.035, 0.035, 0.5), "steel", b.instance("blade"), extra='density="2000"')
        blade = "blade"
        b.body_xml.append(f'<body name="{blade}" pos="{_fmt((3.0 * start, 6.0, PARK_DEPTH))}" '
                          f'gravcomp="1"><freejoint name="{blade}_free"/>{g}</body>')
    return names, blade
