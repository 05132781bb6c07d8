# alaya — the whole setup on a fresh machine is `make demo` or `make test`.
#
# Torch is installed first, from an overridable spec, so that the project's open range never
# pulls a multi-GB CUDA build by accident. GPU users: make TORCH_SPEC="torch==2.13.0" \
#   TORCH_PIP_ARGS="--index-url <your CUDA wheel index>"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
# Debian packages for headless OpenGL (Mesa's EGL + llvmpipe); installed when missing and root.
APT_PACKAGES ?= libegl1 libegl-mesa0 libgl1-mesa-dri libgbm1
BIN := $(VENV)/bin
STAMP := $(VENV)/.alaya-installed

.PHONY: all install system-deps test test-all demo bench clean

all: test

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@$(MAKE) --no-print-directory system-deps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

system-deps:
	@if ldconfig -p 2>/dev/null | grep -q 'libEGL_mesa\.so'; then \
		echo "system-deps: Mesa EGL present"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		echo "system-deps: installing $(APT_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); \
	else \
		echo "system-deps: Mesa EGL not found and not root: install $(APT_PACKAGES) yourself" >&2; \
	fi

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q --runslow

# Until the playable demo lands: render a small dataset, check it, draw its pictures, and let
# the shipped teacher render one of its clips from the G-buffer alone for two prompts.
DEMO ?= out/demo
DEMO_CLIP = $(DEMO)/dataset/clips/clip_00000.npz
demo: $(STAMP)
	$(BIN)/alaya datagen --out $(DEMO)/dataset --clips 6 --frames 32 --size 128 --workers 2
	$(BIN)/alaya validate $(DEMO)/dataset
	$(BIN)/alaya inspect $(DEMO)/dataset --out $(DEMO)
	@if [ -f weights/teacher/model.safetensors ]; then \
		$(BIN)/alaya render --clip $(DEMO_CLIP) --frames 16 --prompt "a golden sunset" --out $(DEMO)/teacher_golden_sunset.gif && \
		$(BIN)/alaya render --clip $(DEMO_CLIP) --frames 16 --prompt "a futuristic city glowing with neon signs" --out $(DEMO)/teacher_neon.gif; \
	fi
	@echo "demo: dataset in $(DEMO)/dataset; contact sheet, per-style GIFs and teacher renders in $(DEMO)/"

bench: $(STAMP)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/codecs.py
	$(BIN)/python bench/teacher.py

clean:
	rm -rf $(VENV) out build *.egg-info src/*.egg-info
