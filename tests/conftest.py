import os

import pytest

os.environ.setdefault("LP_NUM_THREADS", "2")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gl_context():
    from alaya.engine.raster import create_context
    ctx = create_context()
    yield ctx
    ctx.release()
