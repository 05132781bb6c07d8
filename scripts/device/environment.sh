# Sourced by the burst scripts THERE (the lent GPU machine), from the repository root, with PY set:
# unpacks the EGL loaders (.gl), installs the carried wheels (.device/wheels) unless SKIP_WHEELS,
# and points Python, the prompt cache, MuJoCo and GLVND at them.
if [ -d .gl ] && [ -z "${SKIP_GL:-}" ]; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
if [ -z "${SKIP_WHEELS:-}" ]; then
    $PY -m pip install --quiet --no-index --no-deps --target /tmp/alaya_lib .device/wheels/*.whl
    export PYTHONPATH="$PWD/src:/tmp/alaya_lib${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
[ -f .device/prompts.safetensors ] && export ALAYA_PROMPT_CACHE="$PWD/.device/prompts.safetensors"
export PYTHONUNBUFFERED=1 MUJOCO_GL=${MUJOCO_GL:-egl}
nv=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json          # the device README's hint
[ -f "$nv" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-$nv}
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
