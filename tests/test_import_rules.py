"""Imports flow one way (docs/architecture.md)."""

import subprocess
import sys

import pytest

RULES = [
    ("alaya.data.clipio, alaya.data.dataset, alaya.data.validate, alaya.data.importer",
     ("alaya.engine", "alaya.models", "alaya.codecs", "alaya.train")),
    ("alaya.engine.stream, alaya.engine.datagen", ("alaya.models", "alaya.codecs", "alaya.train")),
    ("alaya.text", ("alaya.models", "alaya.train", "alaya.engine")),
    ("alaya.models.teacher, alaya.codecs", ("alaya.train", "alaya.engine")),
    ("alaya.renderers", ("alaya.train", "alaya.engine", "alaya.evaluation")),
    ("alaya.evaluation.metrics", ("alaya.models", "alaya.codecs", "alaya.train", "alaya.engine",
                                  "alaya.renderers")),
    ("alaya.evaluation.render_eval", ("alaya.models", "alaya.engine", "alaya.renderers")),
    ("alaya.models.student, alaya.models.teacher", ("alaya.train", "alaya.runtime", "alaya.serve")),
    ("alaya.runtime", ("alaya.train", "alaya.engine", "alaya.serve", "alaya.evaluation")),
    ("alaya.serve.grpc_server, alaya.serve.web", ("alaya.train", "alaya.models.teacher_training",
                                                  "alaya.models.student_training", "alaya.evaluation")),
    # the world model plays with no engine behind it
    ("alaya.data.actions, alaya.data.episodes, alaya.data.recorder, alaya.data.gym_adapter, "
     "alaya.data.video_import", ("alaya.engine", "alaya.models", "alaya.codecs", "alaya.train")),
    ("alaya.models.world", ("alaya.train", "alaya.runtime", "alaya.serve", "alaya.engine")),
    ("alaya.runtime.world_session", ("alaya.train", "alaya.engine", "alaya.serve", "alaya.evaluation")),
    ("alaya.world", ("alaya.engine", "alaya.train", "alaya.evaluation")),
    ("alaya.serve.world_web", ("alaya.engine.world", "alaya.engine.raster", "alaya.engine.game", "mujoco",
                               "moderngl", "alaya.train", "alaya.evaluation")),
    ("alaya.evaluation.world_eval, alaya.evaluation.inverse_dynamics",
     ("alaya.engine", "alaya.models", "alaya.runtime", "alaya.train")),
]


@pytest.mark.parametrize("modules,forbidden", RULES)
def test_imports_flow_one_way(modules, forbidden):
    code = (f"import sys, {modules}; "
            f"print(sorted({{m for m in sys.modules if m.startswith({forbidden!r})}}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"{modules} imports {out.stdout.strip()}"
