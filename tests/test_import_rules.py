"""Imports flow one way (docs/architecture.md), read from the source.

Every ``import`` and ``from ... import`` of every module under ``src/alaya`` counts, also those
inside functions, so a lazy import cannot hide an arrow that runs back up. Each module belongs
to one group of ``LAYERS``; a module imports its own group and lower layers only, and no
modules import each other in a cycle.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Lowest first. A layer holds groups; a name stands for a module and, for a package, all of it;
# a module belongs to its longest matching name. A group imports itself and lower layers only:
# groups of one layer know nothing of each other. The top layer (the commands) may import any.
LAYERS = (
    (("alaya", "alaya.io", "alaya.hardware", "alaya.paths"),),        # atomic writes, CPU facts, weights
    (("alaya.nn",), ("alaya.diffusion",), ("alaya.data",)),
    (("alaya.text",),
     ("alaya.train.loop", "alaya.train.checkpoint", "alaya.train.plots", "alaya.train.distributed")),
    (("alaya.engine",), ("alaya.codecs",)),
    (("alaya.evaluation",), ("alaya.models",)),
    (("alaya.runtime",),),
    (("alaya.renderers",), ("alaya.world",), ("alaya.serve",)),
    (("alaya.train",),),                                              # the recipes, on the loop
    (("alaya.__main__", "alaya.cli", "alaya.cli_common", "alaya.cli_train", "alaya.cli_world", "alaya.cli_world_train",
      "alaya.prompts"),),
)

# (modules, what none of them may reach, by any chain of imports): the rules beyond the layers
RULES = [
    ("alaya.data", ("alaya.engine",)),
    ("alaya.engine, alaya.data, alaya.text", ("alaya.models", "alaya.codecs", "alaya.train")),
    ("alaya.models.teacher, alaya.models.student, alaya.models.world, alaya.models.view_warp, "
     "alaya.models.scene_memory",
     ("alaya.train", "alaya.runtime", "alaya.serve", "alaya.engine")),
    ("alaya.codecs", ("alaya.train", "alaya.engine")),
    ("alaya.evaluation", ("alaya.train",)),                           # the recipes are in train/
    ("alaya.renderers", ("alaya.train", "alaya.engine", "alaya.evaluation")),
    ("alaya.evaluation.metrics", ("alaya.models", "alaya.codecs", "alaya.train", "alaya.engine",
                                  "alaya.renderers")),
    ("alaya.evaluation.render_eval", ("alaya.models", "alaya.engine", "alaya.renderers")),
    ("alaya.runtime", ("alaya.train", "alaya.engine", "alaya.serve", "alaya.evaluation")),
    ("alaya.serve.grpc_server, alaya.serve.web", ("alaya.train", "alaya.evaluation")),
    # the world model plays with no engine behind it
    ("alaya.world, alaya.runtime.world_session",
     ("alaya.engine", "alaya.train", "alaya.evaluation", "mujoco", "moderngl")),
    ("alaya.serve.world_web", ("alaya.engine.world", "alaya.engine.raster", "alaya.engine.game", "mujoco",
                               "moderngl", "alaya.train", "alaya.evaluation")),
    ("alaya.evaluation.world_eval, alaya.evaluation.world_replay_metrics, alaya.evaluation.inverse_dynamics",
     ("alaya.engine", "alaya.models", "alaya.runtime", "alaya.train")),
]


@cache
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "alaya").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


@cache
def imports(module: str) -> frozenset[str]:
    """Every module ``module`` imports anywhere in its source: ours by module name (a package's
    ``__init__`` only where a name is taken from it), others by their top-level name."""
    path, known, found = modules()[module], modules(), set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            names = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        for name in names:
            if name.split(".")[0] != "alaya":
                found.add(name.split(".")[0])
                continue
            while name not in known:
                name = name.rpartition(".")[0]
            found.add(name)
    found.discard(module)
    return frozenset(found)


def reach(module: str) -> set[str]:
    """What importing ``module`` runs: its imports, theirs, and every package ``__init__`` on the way."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        for dep in imports(m) if m in modules() else ():
            for name in [".".join(dep.split(".")[:i]) for i in range(1, dep.count(".") + 2)]:
                if name not in seen and name != module:
                    seen.add(name)
                    todo.append(name)
    return seen


def group_of(module: str) -> tuple[int, tuple[str, ...]] | None:
    """(layer, group) of a module: its longest matching name in ``LAYERS``."""
    best = None
    for level, layer in enumerate(LAYERS):
        for group in layer:
            for name in group:
                if (module == name or (name != "alaya" and module.startswith(name + "."))) and (
                        best is None or len(name) > len(best[2])):
                    best = (level, group, name)
    return best and best[:2]


def test_every_module_has_a_layer():
    missing = [m for m in modules() if group_of(m) is None]
    assert not missing, f"give these modules a place in LAYERS (and docs/architecture.md): {missing}"


def test_no_module_imports_a_higher_layer():
    top = len(LAYERS) - 1
    wrong = []
    for module in modules():
        if group_of(module) is None:
            continue                       # test_every_module_has_a_layer names it
        level, group = group_of(module)
        for dep in sorted(imports(module)):
            if dep.startswith("alaya") and group_of(dep) is not None:
                dep_level, dep_group = group_of(dep)
                if dep_group != group and dep_level >= level and level != top:
                    wrong.append(f"{module} (layer {level}) imports {dep} (layer {dep_level})")
    assert not wrong, "\n".join(wrong)


def cycles() -> list[list[str]]:
    """The strongly connected parts of the import graph with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for dep in sorted(d for d in imports(m) if d in modules()):
            if dep not in index:
                visit(dep)
                low[m] = min(low[m], low[dep])
            elif dep in on_stack:
                low[m] = min(low[m], index[dep])
        if low[m] == index[m]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == m:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for m in modules():
        if m not in index:
            visit(m)
    return out


def test_no_import_cycle():
    assert cycles() == [], f"modules that import each other: {cycles()}"


def test_the_reader_sees_imports_inside_functions():
    """The reader counts a function's lazy import and resolves names taken from a package."""
    assert "alaya.runtime.int8" in imports("alaya.runtime.onnx_backend")          # inside a method
    assert "alaya.runtime.onnx_cache" in imports("alaya.runtime.onnx_backend")    # from alaya.runtime import onnx_cache
    assert "alaya.runtime" not in imports("alaya.runtime.onnx_backend")
    assert "alaya.runtime.session" in reach("alaya.renderers.student")


@pytest.mark.parametrize("names,forbidden", RULES)
def test_imports_flow_one_way(names, forbidden):
    ours = [m for m in modules() for n in names.split(", ") if m == n or m.startswith(n + ".")]
    assert ours, f"no module matches {names}"
    wrong = {m: sorted(d for d in reach(m) if any(d == f or d.startswith(f + ".") for f in forbidden)) for m in ours}
    assert not any(wrong.values()), {m: d for m, d in wrong.items() if d}
