"""The first result is quiet, and the default model is one object per process.

Time to the first result is measured in ``benchmarks/first_result.py`` (tests assert behaviour,
not time). Here: the README's first example, run in a fresh process on a warm cache, writes its
value to stdout and nothing else anywhere (no progress bars, no warnings); ``Generator()`` and
``generate_json`` decode with the same model object; loading the default is thread-safe; and
structgen's silencing of transformers ends with its own loading.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _readme_example() -> list[tuple[str, str]]:
    """(source, expected output) of each statement of the README's first Python block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    return [(ex.source, ex.want) for ex in doctest.DocTestParser().get_examples(block)]


# Each statement run as the interactive interpreter runs it: an expression's value is printed.
_RUN = """
import sys
sys.path.insert(0, {root!r})
namespace = {{}}
for source in {sources!r}:
    exec(compile(source, "<README.md>", "single"), namespace)
"""


def test_readme_first_example_is_quiet_on_a_warm_cache(smollm2_model):
    # smollm2_model has filled the cache this process uses; the child inherits its location
    examples = _readme_example()
    assert any("generate_json(" in source for source, _ in examples)
    code = _RUN.format(root=str(ROOT), sources=[source for source, _ in examples])
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "".join(want for _, want in examples)
    # a warm cache: not even the one line that announces a first conversion
    assert proc.stderr == ""


def test_generator_and_generate_json_share_the_default_model(smollm2_model, monkeypatch):
    import structgen
    import structgen.api.generator as api

    monkeypatch.setattr(api, "_DEFAULT", None)  # as in a fresh process
    gen = structgen.Generator()
    behind_generate_json = api._default()
    model, tokenizer = smollm2_model
    assert gen.model is model and behind_generate_json.model is model
    assert gen.tokenizer is tokenizer and behind_generate_json.tokenizer is tokenizer
    assert api._default() is behind_generate_json
    assert structgen.Generator().model is model


def test_default_model_loads_once_across_threads(monkeypatch):
    import structgen.decoding.models as models

    loads = []

    def slow_load(**_):
        loads.append(threading.get_ident())
        time.sleep(0.2)  # long enough for every thread to be waiting on the first load
        return object(), object()

    monkeypatch.setattr(models, "_DEFAULT", {})
    monkeypatch.setattr(models, "load_default_model", slow_load)
    got = []
    threads = [threading.Thread(target=lambda: got.append(models.default_model())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1
    assert len(got) == 4 and all(pair is got[0] for pair in got)


@pytest.mark.parametrize("bars_before", [True, False])
def test_quiet_loading_restores_what_it_silenced(bars_before):
    import transformers.modeling_gguf_pytorch_utils as converter
    from transformers.utils import logging as hf_logging

    from structgen.decoding.models import quiet_loading

    verbosity, bars, tqdm = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(), converter.tqdm
    try:
        hf_logging.set_verbosity_info()
        (hf_logging.enable_progress_bar if bars_before else hf_logging.disable_progress_bar)()
        with quiet_loading(converting=True):
            assert not hf_logging.is_progress_bar_enabled()
            assert hf_logging.get_verbosity() == hf_logging.ERROR
            assert converter.tqdm is not tqdm
        assert hf_logging.is_progress_bar_enabled() is bars_before
        assert hf_logging.get_verbosity() == hf_logging.INFO
        assert converter.tqdm is tqdm
    finally:
        hf_logging.set_verbosity(verbosity)
        (hf_logging.enable_progress_bar if bars else hf_logging.disable_progress_bar)()
