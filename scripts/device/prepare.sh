#!/usr/bin/env bash
# Run HERE, once, before a GPU burst (scripts/device/teacher_burst.sh runs THERE).
#
# The lent GPU machine has python3 with torch, numpy, safetensors, tqdm, matplotlib, imageio,
# pillow, pyyaml, but no network and none of our engine's packages. This puts what the burst
# needs into ignored folders that the device tool carries:
#   .device/wheels/         mujoco, mujoco-core, moderngl, glcontext, glfw, PyOpenGL, pytorch-msssim
#                           (CPython 3.12 x86-64 wheels, the device image's Python)
#   .device/prompts.safetensors  MiniLM embeddings of every style phrasing and held-out
#                           paraphrase (ALAYA_PROMPT_CACHE): the 88 MB model stays here
#   .gl/                    EGL/GLVND loaders (Debian packages, unpacked there)
# Carry: .device and .gl  (about 15 MB with the repo's 39 MB: under the 64 MiB limit).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PY=${PY:-.venv/bin/python}
DEVICE_PY=${DEVICE_PY:-3.12}
for d in .device/ .gl/; do grep -qxF "/$d" .git/info/exclude || echo "/$d" >> .git/info/exclude; done
mkdir -p .device/wheels
$PY -m pip download --quiet --only-binary=:all: --no-deps --python-version "$DEVICE_PY" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .device/wheels \
    "mujoco==$($PY -c 'import importlib.metadata as m; print(m.version("mujoco"))')" \
    "mujoco-core==$($PY -c 'import importlib.metadata as m; print(m.version("mujoco-core"))')" \
    "moderngl==$($PY -c 'import importlib.metadata as m; print(m.version("moderngl"))')" \
    "glcontext==$($PY -c 'import importlib.metadata as m; print(m.version("glcontext"))')" \
    glfw PyOpenGL pytorch-msssim onnxruntime onnx protobuf flatbuffers coloredlogs humanfriendly
$PY - <<'PY'
from alaya.engine.styles import STYLE_NAMES, get_style
from alaya.evaluation.render_eval import load_paraphrases
from alaya.text import PromptEncoder
enc = PromptEncoder(cache_file=".device/prompts.safetensors")
prompts = [p for s in STYLE_NAMES for p in get_style(s).phrasings]
prompts += [p for ps in load_paraphrases().values() for p in ps]
enc.encode(prompts)
enc.save_cache()
print(f"{len(prompts)} prompt embeddings in .device/prompts.safetensors")
PY
if command -v apt-get >/dev/null; then
    mkdir -p .gl /tmp/amd64/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    apt-get $o update -qq >/dev/null
    (cd .gl && apt-get $o download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh .device .gl 2>/dev/null
