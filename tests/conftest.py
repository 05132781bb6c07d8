import dataclasses
import os
import sys

import pytest

os.environ.setdefault("LP_NUM_THREADS", "2")

_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Leave with pytest's own exit status once everything is reported. The servers' native
    thread pools (onnxruntime, gRPC, uvicorn's workers) that tests leave behind can abort the
    interpreter's final teardown ("terminate called without an active exception") after every
    test has passed, which would turn a green run into a failed ``make test``. Set
    ALAYA_TEST_SOFT_EXIT=1 to see the normal teardown."""
    if _EXIT_STATUS and os.environ.get("ALAYA_TEST_SOFT_EXIT") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _onnx_graph_cache(tmp_path_factory):
    """Graphs exported by the tests are cached for this run only, not in the user's ~/.cache."""
    old = os.environ.get("ALAYA_ONNX_CACHE")
    os.environ["ALAYA_ONNX_CACHE"] = str(tmp_path_factory.mktemp("onnx_cache"))
    yield
    if old is None:
        os.environ.pop("ALAYA_ONNX_CACHE", None)
    else:
        os.environ["ALAYA_ONNX_CACHE"] = old


@pytest.fixture(scope="session")
def gl_context():
    from alaya.engine.raster import create_context
    ctx = create_context()
    yield ctx
    ctx.release()


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """Six engine clips at 32x32, two styles, with every split non-empty."""
    from alaya.data.dataset import read_meta, write_meta
    from alaya.engine.datagen import DatagenConfig, generate_dataset

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


@pytest.fixture(scope="session")
def styles128_dataset(tmp_path_factory):
    """Three engine clips at 128x128 in every style (one per split): what the shipped style
    classifier and the evaluation see."""
    from alaya.data.dataset import read_meta, write_meta
    from alaya.engine.datagen import DatagenConfig, generate_dataset

    root = tmp_path_factory.mktemp("styles128") / "ds"
    generate_dataset(DatagenConfig(out=str(root), clips=3, frames=6, size=128, seed=11,
                                   rigs=("fly",)), progress=False)
    meta = read_meta(root)
    ids = sorted(meta.clips)
    splits = {"train": ids[:1], "val": ids[1:2], "test": ids[2:]}
    clips = {cid: {**meta.clips[cid], "split": s} for s, members in splits.items() for cid in members}
    write_meta(root, dataclasses.replace(meta, splits=splits, clips=clips))
    return root



@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a module (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``):
    tiny frames run several times faster than on a busy machine's many threads."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
