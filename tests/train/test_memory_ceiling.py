import numpy as np
import pytest

from alaya.train.memory_ceiling import memory_ceiling

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    from tiny_world import record_tiny_episodes
    from alaya.data.episodes import EpisodeDataset
    root = record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=1, frames=40, size=48)
    ds = EpisodeDataset(root)
    return ds.load(ds.ids()[0])


def test_the_gated_insert_keeps_the_memory_near_the_truth_and_holes_only_does_not(episode):
    truth, gated, holes = (memory_ceiling(episode, rule) for rule in ("truth", "gated", "holes"))
    for r in (truth, gated, holes):
        assert r["frames"] == 39 and 0 < r["coverage"] <= 1 and len(r["per_frame"]["sharpness"]) == 39
        assert np.isfinite(r["psnr_covered"]) and r["points"] <= 100_000
    # with a perfect generator the gated rule is as good as inserting the true frames (the training
    # renders), and better than filling only the holes, which keeps the first, coarse sight
    assert gated["psnr_covered"] > truth["psnr_covered"] - 1.5
    assert gated["psnr_covered"] > holes["psnr_covered"]
    with pytest.raises(ValueError, match="rule"):
        memory_ceiling(episode, "everything")
