# alaya — the whole setup on a fresh machine is `make demo` or `make test`.
#
# Torch is installed first, from an overridable spec, so that the project's open range never
# pulls a multi-GB CUDA build by accident. GPU users: make TORCH_SPEC="torch==2.13.0" \
#   TORCH_PIP_ARGS="--index-url <your CUDA wheel index>"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
# Debian packages, installed when missing and root: headless OpenGL (Mesa's EGL + llvmpipe) for
# the engine, and Chromium for the browser test of the play page (Playwright drives it).
APT_PACKAGES ?= libegl1 libegl-mesa0 libgl1-mesa-dri libgbm1
BROWSER_PACKAGES ?= chromium
BIN := $(VENV)/bin
STAMP := $(VENV)/.alaya-installed

.PHONY: all install system-deps test test-all demo showcase bench clean

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
	@if command -v chromium >/dev/null || [ -x /usr/bin/chromium ]; then \
		echo "system-deps: Chromium present"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		echo "system-deps: installing $(BROWSER_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES); \
	else \
		echo "system-deps: Chromium not found and not root: the browser test will be skipped" >&2; \
	fi

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q --runslow

# The main job: the playable world on the shipped weights, at http://127.0.0.1:8000/ (Ctrl+C
# stops it). PORT=... picks another port.
PORT ?= 8000
demo: $(STAMP)
	$(BIN)/alaya play --port $(PORT)

# Pictures instead of a server: render a small dataset, check it, draw its contact sheet, and
# let the shipped teacher render one of its clips from the G-buffer alone for two prompts.
SHOWCASE ?= out/showcase
SHOWCASE_CLIP = $(SHOWCASE)/dataset/clips/clip_00000.npz
showcase: $(STAMP)
	$(BIN)/alaya datagen --out $(SHOWCASE)/dataset --clips 6 --frames 32 --size 128 --workers 2
	$(BIN)/alaya validate $(SHOWCASE)/dataset
	$(BIN)/alaya inspect $(SHOWCASE)/dataset --out $(SHOWCASE)
	$(BIN)/alaya render --clip $(SHOWCASE_CLIP) --frames 16 --prompt "a golden sunset" --out $(SHOWCASE)/teacher_golden_sunset.gif
	$(BIN)/alaya render --model student --clip $(SHOWCASE_CLIP) --prompt "a futuristic city glowing with neon signs" --out $(SHOWCASE)/student_neon.gif
	@echo "showcase: dataset in $(SHOWCASE)/dataset; contact sheet, per-style GIFs and renders in $(SHOWCASE)/"

bench: $(STAMP)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/codecs.py
	$(BIN)/python bench/teacher.py
	$(BIN)/python bench/flash_ablation.py
	$(BIN)/python bench/flash_stream.py
	$(BIN)/python bench/play.py
	$(BIN)/python bench/world.py

clean:
	rm -rf $(VENV) out build *.egg-info src/*.egg-info
