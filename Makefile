# Two commands for a fresh machine (see README.md):
#   make demo   set up, then minify the bundled failing model into a repro
#   make test   set up, then run the test suite
# Both create .venv/ on first use: torch==2.13.0 (the CPU wheel), then pt2kit with its test extras
# (make slow adds the real models' transformers).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# One Inductor cache for the whole run, shared by every test and worker process.
export TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/.cache/inductor

.PHONY: setup models demo lint test test-fast slow scenarios matrix matrix-setup fuzz hunt bench browser screenshots format clean gpu-check gpu-check-dry

setup: $(VENV)/.installed

# TORCH_INDEX: where torch comes from. Empty (the default), pip's own configured index: on
# PyPI, Linux gets the CUDA build (several GB; it runs on a CPU too). For the CPU wheel:
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The slow group's real models (transformers, built from configs): only make slow needs them.
# pyproject.toml's `models` extra, installed alone: pt2kit itself is not reinstalled, so CI adds it
# while make test runs from the same venv (already installed packages are left as they are).
MODELS := transformers>=4.40
models: $(VENV)/.installed-models
$(VENV)/.installed-models: $(VENV)/.installed
	$(PY) -m pip install --quiet '$(MODELS)'
	touch $@

demo: setup
	$(VENV)/bin/minify run --out runs examples/relu_compile_error.py

# Tests run side by side in JOBS pytest-xdist workers (each test's own processes,
# pt2kit's zygote and the program, share the cores). make slow's loadscope is tests/conftest.py's:
# the tests of one scenario or genuine bug read one minify run, cached per process, so they go
# to one worker together; every other test goes alone, all in conftest's order (long first).
# --dist load hands out tests in that order a few at a time (--maxschedchunk 1): by default its
# first batch is a quarter of the suite per worker, so one worker got most of the end-to-end
# tests up front and the other idled at the end.
JOBS ?= 2
XDIST := -n $(JOBS) --dist load --maxschedchunk 1
# make slow's tests wait on their own processes more (a cold Inductor compile, a program
# under capture): three workers keep both cores busy (196% CPU against 158% with two).
SLOW_JOBS ?= 3

# Everything but the slow group: the decisions in-process, the planted backends end to end,
# after the lint: ruff (pyproject.toml's rules: pyflakes, syntax errors, and those the suppressions name),
# the import contracts of pyproject.toml (import-linter), and mypy on pt2kit's packages.
test: lint
	$(PY) -m pytest -q $(XDIST) -m 'not slow'

LINTED := pt2kit minifier replay validation explain opcheck benchmarks tests examples
lint: setup
	$(PY) -m ruff check --quiet $(LINTED)
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(PY) -m mypy

# The slow group: real Inductor and real models, PyTorch's own minifier scenarios ported
# to CPU and the genuine torch bugs of tests/minifier/real_bugs. CI runs it after make test.
slow: models
	$(PY) -m pytest -q -n $(SLOW_JOBS) --dist loadscope --no-loadscope-reorder -m 'slow and not gpu_check'

# Only PyTorch's scenarios and the genuine bugs (a part of make slow).
scenarios: setup
	$(PY) -m pytest -q -n $(SLOW_JOBS) --dist loadscope --no-loadscope-reorder -m scenarios

# The other supported torch releases, each as the CUDA build a plain `pip install torch`
# gives (it runs on the CPU): `minify doctor` and the tests marked `matrix` (every seam's
# probe, each package's in-process decisions, one end-to-end path per door); make test
# runs all of them on 2.13. Each venv lies beside .venv; pip's constraints file (if any)
# is lifted for these installs only, and pip's cache is reused.
MATRIX_TORCH ?= 2.11.0 2.12.0 2.14.1 2.15.0
MATRIX_VENVS := $(foreach v,$(MATRIX_TORCH),.venv-$(basename $(v)))
# The releases whose tests run (doctor probes every seam on all of them). CI's time (90 minutes
# in all) goes to the releases pt2kit is developed for, 2.13 to 2.15: 2.11 and 2.12 (each seam's
# older way, docs/seams.md) are probed by doctor there, and
# make matrix MATRIX_TESTED="2.11.0 2.12.0 2.14.1 2.15.0" tests each.
MATRIX_TESTED ?= 2.14.1 2.15.0
# Of those, the releases whose end-to-end door paths run too (the `matrix` tests marked `e2e`: a minify
# run, a replay, a hook per door, a few minutes each release); the others run every seam's probe and the
# in-process decisions. 2.15, the newest and furthest from 2.13, runs them all;
# make matrix MATRIX_E2E="2.14.1 2.15.0" runs them on both.
MATRIX_E2E ?= 2.15.0
.venv-%/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv .venv-$*
	PIP_CONFIG_FILE=/dev/null .venv-$*/bin/pip install --quiet torch==$(filter $*.%,$(MATRIX_TORCH))
	PIP_CONFIG_FILE=/dev/null .venv-$*/bin/pip install --quiet -e '.[test]'
	touch $@

# The venvs alone (CI installs them while make test runs: see .ci/run).
matrix-setup: $(foreach v,$(MATRIX_VENVS),$(v)/.installed)

# make matrix's verdict on `minify doctor --json`: every seam works, or wraps a torch feature
# younger than that release (doctor's status "absent": cache regions on 2.11 and 2.12).
export DOCTOR_VERDICT := import json, sys; d = json.load(sys.stdin); print("minify doctor:", d["status"], *(s["seam"] + ": " + s["error"] for s in d["seams"] if not s["ok"])); sys.exit(d["status"] not in ("ok", "absent"))

matrix: matrix-setup
	@for venv in $(MATRIX_VENVS); do \
		echo "== $$venv: `$$venv/bin/python -c 'import torch; print(torch.__version__)'`"; \
		$$venv/bin/minify doctor --json | $$venv/bin/python -c "$$DOCTOR_VERDICT" || exit 1; \
		case " $(foreach v,$(MATRIX_TESTED),.venv-$(basename $(v))) " in *" $$venv "*) \
			case " $(foreach v,$(MATRIX_E2E),.venv-$(basename $(v))) " in *" $$venv "*) marks='matrix and not slow';; \
			*) marks='matrix and not slow and not e2e'; echo "(end-to-end door paths left out: MATRIX_E2E)";; esac; \
			$$venv/bin/python -m pytest -q -p no:cacheprovider $(XDIST) -m "$$marks" || exit 1;; \
		*) echo "(doctor only: MATRIX_TESTED)";; esac; \
	done

# pt2kit's packages laid out by ruff at 120 columns (pyproject.toml's [tool.ruff]).
format: setup
	$(PY) -m ruff format pt2kit minifier replay validation explain opcheck benchmarks

test-fast: setup
	$(PY) -m pytest -q $(XDIST) -m 'not slow and not e2e'

# The fuzzer's long profile: FUZZ_EXAMPLES generated programs, each new kind of
# breakage shrunk by Hypothesis; a line per case and a summary.
FUZZ_EXAMPLES ?= 40
fuzz: setup
	PT2KIT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -s -p no:cacheprovider tests/minifier/test_fuzz.py::test_fuzz_long

# minify hunt: generated programs against the real torch.compile, every distinct bug minified
# (docs/hunt.md). HUNT_MINUTES and HUNT_SEED pick how long and which programs.
HUNT_MINUTES ?= 30
HUNT_SEED ?= 0
hunt: setup
	$(PY) -m minifier hunt --minutes $(HUNT_MINUTES) --seed $(HUNT_SEED) --out pt2kit_hunt/seed-$(HUNT_SEED)

bench: setup
	$(PY) -m pip install --quiet -e '.[test,models,bench]'
	$(PY) benchmarks/bench_bisect.py
	$(PY) benchmarks/bench_minifier.py
	$(PY) benchmarks/bench_explain.py
	$(PY) benchmarks/bench_opcheck.py
	PT2KIT_AUTOLOAD=0 $(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_pages.py
	$(PY) benchmarks/bench_validation.py
	$(PY) benchmarks/bench_hook.py
	$(PY) benchmarks/bench_real_models.py --curve

# Headless Chromium for the page tests (tests/minifier/test_pages_browser.py skips without it):
# Debian's package, never a browser a test tool downloads.
browser:
	@command -v chromium >/dev/null || (apt-get install -y -q chromium >/dev/null || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null))
	@chromium --version

# The screenshots in docs/images, as the browser test takes them.
screenshots: setup browser
	PT2KIT_SCREENSHOTS=docs/images $(PY) -m pytest -q -p no:cacheprovider tests/minifier/test_pages_browser.py

clean:
	rm -rf $(VENV) .cache runs build *.egg-info

# On a machine with a GPU and the torch it has (pt2kit from this checkout goes on the path beside
# it, nothing installed over it): doctor, a Triton kernel that does not compile, a CUDA training
# step whose backward breaks, a wrong answer; each repro run alone (tests/gpu_check.py).
# GPU_CHECK=--dry-run runs the same on the CPU (C++ kernels, the cpu device).
GPU_CHECK ?=
gpu-check:
	$(PYTHON) tests/gpu_check.py $(GPU_CHECK)

# The same script's dry run on the CPU, checked by its test: run it before a GPU machine's
# (scarce) minutes are spent on it. make slow leaves it out: its tests cover each step.
gpu-check-dry: models
	$(PY) -m pytest -q -p no:cacheprovider -m gpu_check tests/minifier/test_entry_points.py
