"""Determinism, sizes, styles and physics behaviour of the built-in world."""

from dataclasses import replace

import numpy as np
import pytest

from alaya.data.clipio import write_clip
from alaya.engine.camera import WalkRig
from alaya.engine.materials import EMISSIVE_MATERIALS, MATERIAL_IDS, MATERIALS
from alaya.engine.raster import GBufferRasterizer
from alaya.engine.scene import SceneConfig, generate_scene
from alaya.engine.stream import EngineStream, StreamConfig, render_clip
from alaya.engine.styles import STYLE_NAMES, STYLES, Style, get_style
from alaya.engine.world import World


def test_material_library_is_complete():
    assert len(MATERIALS) >= 12
    assert len({m.name for m in MATERIALS}) == len(MATERIALS)
    assert any(max(m.emission) > 0 for m in MATERIALS)
    for m in MATERIALS:
        assert 0 <= m.roughness <= 1 and 0 <= m.metallic <= 1
        assert all(0 <= c <= 1 for c in m.albedo)


def test_styles_have_phrasings():
    assert len(STYLES) >= 6
    for s in STYLES.values():
        assert len(s.phrasings) >= 3 and len(set(s.phrasings)) == len(s.phrasings)
    with pytest.raises(KeyError, match="unknown style"):
        get_style("vaporwave")


def test_styles_round_trip_through_their_json_form():
    assert STYLE_NAMES[:3] == ("clear_noon", "golden_sunset", "moonlit_night")   # styles.json's order
    for name, s in STYLES.items():
        assert Style.from_json(name, s.to_json()) == s
    assert STYLES["neon_night"].fill_direction == (15, 120)     # lists become tuples
    with pytest.raises(TypeError, match="glow"):
        Style.from_json("bad", {"description": "", "phrasings": [], "parameters": {"glow": 1.0}})


def test_same_seed_gives_byte_identical_clips(gl_context, tmp_path):
    cfg = StreamConfig(size=48, rig="walk")
    a = render_clip(21, 4, ("clear_noon", "neon_night"), cfg, gl_context)
    b = render_clip(21, 4, ("clear_noon", "neon_night"), cfg, gl_context)
    write_clip(tmp_path / "a.npz", a)
    write_clip(tmp_path / "b.npz", b)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    c = render_clip(22, 4, ("clear_noon", "neon_night"), cfg, gl_context)
    assert not np.array_equal(a["depth"], c["depth"])


def test_every_style_differs_from_every_other(gl_context):
    clip = render_clip(5, 2, STYLE_NAMES, StreamConfig(size=64, rig="orbit"), gl_context)
    rgb = clip["rgb"][:, -1].astype(np.float32)
    for i in range(len(STYLE_NAMES)):
        for j in range(i + 1, len(STYLE_NAMES)):
            diff = np.abs(rgb[i] - rgb[j]).mean()
            assert diff > 8.0, f"{STYLE_NAMES[i]} vs {STYLE_NAMES[j]}: mean difference {diff:.1f}"


@pytest.fixture(scope="module")
def noon_stream(gl_context):
    stream = EngineStream(5, StreamConfig(size=96, rig="orbit"), gl_context)
    for _ in range(10):
        stream.step()
    return stream


def _render(stream, style):
    return stream.reference.render(style, stream.world_to_camera).astype(np.float32)


def test_cast_shadows_come_from_the_shadow_map(noon_stream):
    noon = get_style("clear_noon")
    lit = _render(noon_stream, noon)
    unshadowed = _render(noon_stream, replace(noon, shadow_strength=0.0))
    darker = (unshadowed - lit).mean(-1) > 10
    assert darker.mean() > 0.01, "some pixels should lie in cast shadow"
    # shadows only remove light (up to 8-bit rounding and tone-mapping/bloom cross-talk)
    assert ((lit - unshadowed).mean(-1) > 4).mean() < 1e-3, "shadows only remove light"


def test_fog_and_bloom_are_non_local(noon_stream):
    neon = get_style("neon_night")
    with_bloom = _render(noon_stream, neon)
    without = _render(noon_stream, replace(neon, bloom_strength=0.0))
    glow = with_bloom.mean(-1) - without.mean(-1)
    emissive = np.isin(noon_stream.raster.read()["material"], [MATERIAL_IDS[m] for m in EMISSIVE_MATERIALS])
    if emissive.any():
        # the glow spreads beyond the emissive pixels themselves
        assert (glow[~emissive] > 3).sum() > 20
    fog = get_style("foggy_morning")
    far = noon_stream.raster.read()["depth"]
    img = _render(noon_stream, fog)
    clear = _render(noon_stream, replace(fog, fog_density=0.0))
    change = np.abs(img - clear).mean(-1)
    near_px, far_px = (far > 0) & (far < np.percentile(far[far > 0], 20)), far > np.percentile(far[far > 0], 80)
    assert change[far_px].mean() > change[near_px].mean(), "fog grows with distance"


@pytest.mark.parametrize("width,height", [(128, 128), (256, 256), (96, 64), (48, 160)])
def test_rasterizer_sizes(gl_context, width, height):
    scene = generate_scene(1)
    world = World(scene)
    r = GBufferRasterizer(scene, width, height, ctx=gl_context)
    from alaya.engine.camera import look_at
    f = r.render(world.geom_matrices(), look_at((6, 6, 3), (0, 0, 0.5)))
    assert f["depth"].shape == (height, width) and f["normal"].shape == (height, width, 3)
    assert f["mask"].any() and not f["mask"].all()
    r.release()


@pytest.mark.parametrize("bad", [0, 100, 130, -16])
def test_rasterizer_rejects_bad_sizes(gl_context, bad):
    with pytest.raises(ValueError, match="multiple of 16"):
        GBufferRasterizer(generate_scene(1), bad, 128, ctx=gl_context)


def test_scene_is_deterministic_and_varied():
    a, b, c = generate_scene(9), generate_scene(9), generate_scene(10)
    assert a.xml == b.xml and a.xml != c.xml
    kinds = {g.kind for s in (generate_scene(k) for k in range(6)) for g in s.geoms}
    assert {"box", "sphere", "capsule", "cylinder", "hfield"} <= kinds
    flat = generate_scene(3, SceneConfig(terrain_amplitude=0.0))
    assert flat.heightfield is None


def test_objects_fall_roll_and_get_pushed():
    world = World(generate_scene(7))
    start = {b: world.data.body(b).xpos.copy() for b in world.dynamic_bodies}
    for _ in range(90):
        world.step()
    moved = [np.linalg.norm(world.data.body(b).xpos - start[b]) for b in world.dynamic_bodies]
    assert np.median(moved) > 0.3, "objects should fall and move"
    z = [world.data.body(b).xpos[2] for b in world.dynamic_bodies]
    assert min(z) > -1.0, "nothing falls through the ground"
    body = world.dynamic_bodies[0]
    before = world.data.body(body).cvel.copy()
    world.kick(body, (0.0, 0.0, 5.0))
    world.step()
    assert not np.allclose(world.data.body(body).cvel, before)


def test_walker_collides_with_walls():
    cfg = SceneConfig(player=True)
    world = World(generate_scene(3, cfg))
    rig = WalkRig(np.random.default_rng(0))
    rig.yaw = 0.0
    rig.command = (3.0, 0.0, 0.0, 0.0)    # walk straight at the +x border wall
    for _ in range(300):
        rig.control(world)
        world.step()
    x = world.player_position()[0]
    assert x < cfg.arena, f"the walker went through the wall (x = {x:.2f})"
    assert x > cfg.arena - 1.5, "the walker should have reached the wall"
