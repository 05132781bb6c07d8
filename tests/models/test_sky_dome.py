"""The sky dome (``alaya.models.sky_dome``, ``SceneMemoryConfig.sky_dome``) against the engine: the
sky a frame saw comes back from anywhere it is seen again, walking does not move it, turning
moves it as the game does, and the memory's points still stand in front of it."""

import math

import numpy as np
import pytest
import torch

from alaya.engine.game import GameConfig, GameStream
from alaya.engine.styles import get_style
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig
from alaya.models.sky_dome import SkyDome, pixel_directions
from alaya.models.view_warp import pinhole
from alaya.train.world_memory import memory_key

SIZE = 128

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def game():
    g = GameStream(11, GameConfig(size=SIZE, warmup_frames=30))
    g.step()
    yield g
    g.close()


def shot(game, view: np.ndarray, style: str = "golden_sunset") -> tuple[torch.Tensor, torch.Tensor]:
    """The engine's frame from ``view``: rgb (H, W, 3) uint8, depth (H, W) metres (0 on the sky)."""
    depth = game.raster.render(game.world.geom_matrices(), view.astype(np.float32))["depth"]
    rgb = game.reference.render(get_style(style), view.astype(np.float32))
    return torch.from_numpy(np.ascontiguousarray(rgb)), torch.from_numpy(np.ascontiguousarray(depth)).float()


def walked(view: np.ndarray, ahead: float = 0.0, turn_degrees: float = 0.0) -> np.ndarray:
    """``view`` with the camera walked ``ahead`` metres along its view axis, then turned left."""
    shift = np.eye(4)
    shift[2, 3] = ahead                      # the camera looks down -z: walking ahead moves the world +z
    a = math.radians(turn_degrees)
    turn = np.eye(4)
    turn[[0, 0, 2, 2], [0, 2, 0, 2]] = [math.cos(a), -math.sin(a), math.sin(a), math.cos(a)]
    return turn @ shift @ view.astype(np.float64)


LEVEL = torch.tensor([[0.0, -1.0, 0.0, 0.0],        # a camera looking along world +x, level (world z up)
                      [0.0, 0.0, 1.0, 0.0],
                      [-1.0, 0.0, 0.0, 0.0],
                      [0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)


def psnr(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    mse = float(((a.float() - b.float())[mask] ** 2).mean()) / 255 ** 2
    return 100.0 if mse == 0 else 10 * math.log10(1 / mse)


def up_view(game) -> np.ndarray:
    """The game's camera pitched 15 degrees up: a third or more of the frame is sky."""
    view = np.asarray(game.world_to_camera, np.float64)
    a = math.radians(15)
    pitch = np.eye(4)
    pitch[[1, 1, 2, 2], [1, 2, 1, 2]] = [math.cos(a), math.sin(a), -math.sin(a), math.cos(a)]
    return pitch @ view


def test_the_sky_comes_back_from_where_the_player_walked_and_turned(game):
    """Against the engine: the sky seen at the start, rendered from 6 m ahead and 12 degrees to
    the left, matches the engine's sky there; a backdrop of points 25 m away (what the memory kept
    before) slides and scores far lower."""
    K = torch.as_tensor(np.asarray(game.K, np.float64))
    start = up_view(game)
    rgb, depth = shot(game, start)
    assert (depth == 0).float().mean() > 0.25, "the test needs a view with sky in it"
    dome = SkyDome()
    assert dome.insert(rgb, depth == 0, K, start) > 0
    backdrop = SceneMemory(SceneMemoryConfig(confirm=False))
    backdrop.insert(rgb, torch.where(depth > 0, depth, torch.full_like(depth, 25.0)) * (depth == 0), K, start, time=0)

    there = walked(start, ahead=6.0, turn_degrees=12.0)
    true_rgb, true_depth = shot(game, there)
    got, covered = dome.render(K, there, SIZE, SIZE)
    got = (got.permute(1, 2, 0) * 255).round()
    sky = (true_depth == 0) & (covered[0] > 0)
    assert sky.float().mean() > 0.15                       # most of the sky it saw is in view again
    dome_psnr = psnr(got, true_rgb, sky)
    old = backdrop.render(K, there, SIZE, SIZE)
    old_sky = sky & (old.coverage[0] > 0)
    backdrop_psnr = psnr((old.rgb.permute(1, 2, 0) * 255).round(), true_rgb, old_sky)
    assert dome_psnr >= 33.0, dome_psnr
    assert dome_psnr >= backdrop_psnr + 3.0, (dome_psnr, backdrop_psnr)


def test_walking_does_not_move_it_and_turning_does():
    """A render depends on the view's rotation alone, and a turn shifts the picture by the turn."""
    K = pinhole(64, 70.0)
    view = LEVEL
    directions = pixel_directions(K, view, 64, 64)
    colour = ((directions[:2] * 0.5 + 0.5) * 255).T.reshape(64, 64, 2)          # colour = direction
    rgb = torch.cat([colour, torch.full((64, 64, 1), 128.0)], -1).round().to(torch.uint8)
    dome = SkyDome()
    dome.insert(rgb, torch.ones(64, 64, dtype=torch.bool), K, view)
    a, cov_a = dome.render(K, torch.tensor(walked(view.numpy(), ahead=9.0)), 64, 64)
    b, cov_b = dome.render(K, view, 64, 64)
    assert torch.equal(a, b) and torch.equal(cov_a, cov_b) and cov_b.all()
    assert ((b.permute(1, 2, 0) * 255 - rgb.float()).abs().max()) <= 2.0
    turned = torch.tensor(walked(view.numpy(), turn_degrees=10.0))
    c, cov_c = dome.render(K, turned, 64, 64)
    expect = ((pixel_directions(K, turned, 64, 64)[:2] * 0.5 + 0.5) * 255).reshape(2, 64, 64)
    seen = cov_c[0] > 0
    assert 0.6 < seen.float().mean() < 0.95                  # the side it turned to is not known
    assert ((c[:2] * 255 - expect).abs()[:, seen]).max() <= 2.0


def test_first_sight_stays_and_the_memory_points_stand_in_front():
    """A cell keeps its first colour; in a SceneMemory with a dome, depths at or beyond it go to
    the dome (not points), and a render shows the sky at that depth only where no point covers."""
    K = pinhole(32, 70.0)
    view = LEVEL
    dome = SkyDome()
    red = torch.zeros(32, 32, 3, dtype=torch.uint8)
    red[..., 0] = 200
    assert dome.insert(red, torch.ones(32, 32, dtype=torch.bool), K, view) > 0
    assert dome.insert(255 - red, torch.ones(32, 32, dtype=torch.bool), K, view) == 0
    assert (dome.render(K, view, 32, 32)[0][0] * 255).round().eq(200).all()

    memory = SceneMemory(SceneMemoryConfig(sky_dome=25.0, confirm=False))
    depth = torch.full((32, 32), 25.0)
    depth[20:, :] = 3.0                                      # a floor strip in front
    memory.insert(red, depth, K, view, time=0)
    assert len(memory) == 12 * 32                            # the sky is no points
    r = memory.render(K, view, 32, 32)
    assert r.coverage.all()
    assert torch.allclose(r.depth[0, :20], torch.full((20, 32), 25.0))
    assert torch.allclose(r.depth[0, 20:], torch.full((12, 32), 3.0), rtol=1e-3)
    assert memory.nbytes == 31 * len(memory) + dome.nbytes


def test_bad_input_names_the_field_and_old_caches_keep_their_key():
    with pytest.raises(ValueError, match="cells_per_degree"):
        SkyDome(0.0)
    with pytest.raises(ValueError, match="sky_dome"):
        SceneMemoryConfig(sky_dome=-1.0)
    with pytest.raises(ValueError, match="sky"):
        SkyDome().insert(torch.zeros(8, 8, 3, dtype=torch.uint8), torch.ones(4, 4, dtype=torch.bool),
                         pinhole(8, 70.0), torch.eye(4))
    plain = SceneMemoryConfig()
    assert memory_key(plain, 25.0) == memory_key(SceneMemoryConfig(sky_dome=0.0), 25.0)   # caches made before the dome
    assert memory_key(SceneMemoryConfig(sky_dome=25.0), 25.0) != memory_key(plain, 25.0)


def test_a_session_walking_ahead_keeps_its_sky_in_place():
    """A memory session with ``memory_sky_dome`` (a model that shows its memory unchanged): the
    sky rows go into the dome, not into points, and after walking 1 m ahead the rows the wall 3 m
    away does not grow into show the start's sky where it was; with the 25 m backdrop they have
    moved."""
    import dataclasses

    from alaya.data.actions import action_vector
    from alaya.models.world import WorldModel, WorldModelConfig
    from alaya.runtime.world_session import WorldSession
    config = WorldModelConfig(memory=True, latent_channels=80, widths=(16, 32), emb_dim=32, steps=1,
                              memory_max_points=5000, memory_sky_depth=25.0, sigma_data=1e-4)
    rng = np.random.default_rng(4)
    frame = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    depth = np.full((32, 32), 3.0, np.float32)
    depth[:12] = 0                                              # the sky
    skies = {}
    for dome in (True, False):
        model = WorldModel(dataclasses.replace(config, memory_sky_dome=dome))
        with torch.no_grad():
            model.core.out.bias[64:] = 1e6                      # the gate shows the memory wherever it covers
        session = WorldSession(model, size=32, backend="torch")
        session.reset(frame, depth=depth, pitch=0.0)
        assert len(session.memory) == (32 * 20 if dome else 32 * 32)
        for _ in range(10):
            out = session.step(action_vector(1.0, 0.0, 0.0, 0.0, None))
        skies[dome] = out[:8].astype(int)
    assert np.abs(skies[True] - frame[:8]).max() <= 2
    assert np.abs(skies[False] - frame[:8]).mean() > 10


def test_extend_draws_the_unseen_sky_by_elevation_and_leaves_out_the_sun():
    """``extend``: after a turn the side no frame showed is its elevation's seen colour (a sun in
    the seen sky does not spread); above the highest seen elevation the highest row's colour;
    below the lowest seen elevation that row's, down to the horizon, and below it nothing. Without
    ``extend`` the unseen side stays uncovered."""
    K = pinhole(64, 70.0)
    view = LEVEL
    directions = pixel_directions(K, view, 64, 64)
    elevation = torch.rad2deg(torch.asin(directions[2])).reshape(64, 64)
    rgb = torch.zeros(64, 64, 3, dtype=torch.uint8)
    rgb[..., 0] = (100 + 3 * elevation).round().clamp(0, 255).to(torch.uint8)   # red rises with elevation
    rgb[..., 2] = 180
    rgb[10:14, 30:34] = 255                                                   # a sun
    sky = elevation >= 5.0                                                    # a wall's top below 5 degrees
    plain, extended = SkyDome(), SkyDome(extend=True)
    for dome in (plain, extended):
        assert dome.insert(rgb, sky, K, view) > 0
    a = math.radians(20)                                                      # ... and looking 20 degrees up
    pitch = np.eye(4)
    pitch[[1, 1, 2, 2], [1, 2, 1, 2]] = [math.cos(a), math.sin(a), -math.sin(a), math.cos(a)]
    turned = torch.tensor(pitch @ walked(view.numpy(), turn_degrees=120.0))   # all of it unseen before
    got, covered = extended.render(K, turned, 64, 64)
    assert plain.render(K, turned, 64, 64)[1].sum() == 0
    e = torch.rad2deg(torch.asin(pixel_directions(K, turned, 64, 64)[2])).reshape(64, 64)
    seen_top = float(elevation[sky].max())
    band = (e >= 6.0) & (e <= seen_top - 1.0)
    low = (e >= 0.5) & (e < 4.0)                                              # under the seen sky, over the horizon
    assert covered[0][band].all() and covered[0][low].all() and not covered[0][e < -0.5].any()
    red = got[0] * 255
    seen_bottom = float(elevation[sky].min())
    assert low.any() and (red[low] - (100 + 3 * seen_bottom)).abs().max() <= 6.0   # the lowest seen row's
    extended.reach_down_to(-90.0)                                             # a session drawing floor and walls
    got, covered = extended.render(K, turned, 64, 64)
    assert covered[0].all() and (got[0] * 255 - (100 + 3 * seen_bottom)).abs()[e < -0.5].max() <= 6.0
    with pytest.raises(ValueError, match="elevation_degrees"):
        extended.reach_down_to(10.0)
    assert (red[band] - (100 + 3 * e[band])).abs().max() <= 6.0               # the row's colour, no sun
    assert (got[2] * 255 - 180).abs()[band].max() <= 1.0
    above = e > seen_top + 2.0
    assert above.any() and covered[0][above].all()
    assert (red[above] - (100 + 3 * seen_top)).abs().max() <= 6.0
    # a cell the frame saw keeps its own colour: the start view renders back as before
    a, cov_a = extended.render(K, view, 64, 64)
    b, cov_b = plain.render(K, view, 64, 64)
    assert torch.equal(a[:, cov_b[0] > 0], b[:, cov_b[0] > 0])


def test_a_session_with_an_extended_dome_keeps_generated_sky_out_of_it():
    """``memory_sky_extend``: only the start frame's sky goes into the dome; the generated frames'
    sky does not (their colours are a guess), and the config asks for the dome it extends."""
    import dataclasses

    from alaya.data.actions import action_vector
    from alaya.models.world import WorldModel, WorldModelConfig
    from alaya.runtime.world_session import WorldSession
    with pytest.raises(ValueError, match="memory_sky_extend"):
        WorldModelConfig(memory=True, latent_channels=80, memory_sky_depth=25.0, memory_sky_extend=True)
    config = WorldModelConfig(memory=True, latent_channels=80, widths=(16, 32), emb_dim=32, steps=1,
                              memory_max_points=5000, memory_sky_depth=25.0, sigma_data=1e-4,
                              memory_sky_dome=True)
    rng = np.random.default_rng(5)
    frame = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    depth = np.full((32, 32), 3.0, np.float32)
    depth[:12] = 0
    seen = {}
    for extend in (True, False):
        model = WorldModel(dataclasses.replace(config, memory_sky_extend=extend))
        session = WorldSession(model, size=32, backend="torch")
        session.reset(frame, depth=depth, pitch=0.0)
        assert session.memory.dome.extend is extend
        at_start = int(session.memory.dome.seen.sum())
        for _ in range(6):
            session.step(action_vector(0.0, 0.0, 1.0, 0.0, None))            # turning: new sky comes into view
        seen[extend] = (at_start, int(session.memory.dome.seen.sum()))
    assert seen[True][1] == seen[True][0]
    assert seen[False][1] > seen[False][0], seen      # (the untrained model draws sky where it turns)


def test_a_render_of_some_pixels_is_the_full_render_there_and_nothing_elsewhere():
    dome = SkyDome(extend=True)
    K, view = pinhole(32, 70.0), LEVEL
    rgb = (torch.rand(32, 32, 3, generator=torch.Generator().manual_seed(0)) * 255).to(torch.uint8)
    dome.insert(rgb, torch.ones(32, 32, dtype=torch.bool), K, view)
    turned = torch.tensor(walked(view.numpy(), turn_degrees=20.0))
    full, full_cov = dome.render(K, turned, 32, 32)
    pixels = torch.arange(0, 32 * 32, 3)
    part, part_cov = dome.render(K, turned, 32, 32, pixels=pixels)
    assert torch.equal(part.reshape(3, -1)[:, pixels], full.reshape(3, -1)[:, pixels])
    assert torch.equal(part_cov.reshape(-1)[pixels], full_cov.reshape(-1)[pixels]) and full_cov.sum() > 100
    rest = torch.ones(32 * 32, dtype=torch.bool).index_fill_(0, pixels, False)
    assert not part.reshape(3, -1)[:, rest].any() and not part_cov.reshape(-1)[rest].any()
    with pytest.raises(ValueError, match="pixels"):
        dome.render(K, turned, 32, 32, pixels=torch.tensor([32 * 32]))


def test_the_horizon_colour_is_the_lowest_seen_sky():
    """Per seen column the lowest seen cell, their median: the sky just over a wall's top (the
    fog's colour meets the sky there, ``aerial_fog``); None before any sky is seen."""
    K = pinhole(64, 70.0)
    directions = pixel_directions(K, LEVEL, 64, 64)
    elevation = torch.rad2deg(torch.asin(directions[2])).reshape(64, 64)
    rgb = torch.zeros(64, 64, 3, dtype=torch.uint8)
    rgb[..., 0] = (100 + 3 * elevation).round().clamp(0, 255).to(torch.uint8)   # red rises with elevation
    rgb[..., 1] = 90
    sky = elevation >= 5.0
    dome = SkyDome()
    assert dome.horizon_colour() is None
    dome.insert(rgb, sky, K, LEVEL)
    got = dome.horizon_colour() * 255
    assert abs(got[0] - (100 + 3 * 5.0)) <= 4.0 and abs(got[1] - 90) <= 1.0 and got[2] == 0
