# Two commands for a fresh machine (see README.md):
#   make demo   set up, then minify the bundled failing model into a repro
#   make test   set up, then run the test suite
# Both create .venv/ on first use: torch==2.13.0 (the CPU wheel), then pt2kit with its test extras.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# One Inductor cache for the whole run, shared by every test and worker process.
export TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/.cache/inductor

.PHONY: setup demo test test-fast scenarios fuzz bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: setup
	$(VENV)/bin/minify run --out runs examples/relu_compile_error.py

test: setup
	$(PY) -m pytest -q -m 'not scenarios'

# PyTorch's own minifier scenarios, ported to CPU (about 8 minutes; CI runs them after make test).
scenarios: setup
	$(PY) -m pytest -q -m scenarios

test-fast: setup
	$(PY) -m pytest -q -m 'not slow and not e2e'

# The fuzzer's long profile: FUZZ_EXAMPLES generated programs, each new kind of
# breakage shrunk by Hypothesis; a line per case and a summary.
FUZZ_EXAMPLES ?= 40
fuzz: setup
	PT2KIT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -s -p no:cacheprovider tests/test_fuzz.py::test_fuzz_long

bench: setup
	$(PY) -m pip install --quiet -e '.[test,bench]'
	$(PY) benchmarks/bench_bisect.py
	$(PY) benchmarks/bench_minifier.py
	$(PY) benchmarks/bench_explain.py
	$(PY) benchmarks/bench_opcheck.py
	PT2KIT_AUTOLOAD=0 $(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_validation.py
	$(PY) benchmarks/bench_hook.py
	$(PY) benchmarks/bench_real_models.py --curve

clean:
	rm -rf $(VENV) .cache runs build *.egg-info
