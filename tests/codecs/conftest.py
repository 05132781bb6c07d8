import dataclasses

import pytest

from alaya.data.dataset import read_meta, write_meta
from alaya.engine.datagen import DatagenConfig, generate_dataset


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """Six engine clips at 32x32, two styles, with every split non-empty."""
    root = tmp_path_factory.mktemp("codec_data") / "ds"
    generate_dataset(DatagenConfig(out=str(root), clips=6, frames=3, size=32,
                                   styles=("clear_noon", "toon"), seed=4), progress=False)
    meta = read_meta(root)
    ids = sorted(meta.clips)
    splits = {"train": ids[:4], "val": ids[4:5], "test": ids[5:]}
    clips = {cid: {**info, "split": s} for s, members in splits.items()
             for cid in members for info in [meta.clips[cid]]}
    write_meta(root, dataclasses.replace(meta, splits=splits, clips=clips))
    return root
