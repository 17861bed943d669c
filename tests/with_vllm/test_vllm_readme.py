"""The README's vLLM section runs as written, beside vLLM: its offline block starts an engine
(``__name__`` is ``"__main__"`` here, as when the block is a script), its client block talks to
the ``vllm serve`` of the ``server`` fixture (started as the section's command says; the block's
``http://127.0.0.1:8000`` is pointed at the fixture's port)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from cases import ROOT


def _readme_module():
    spec = importlib.util.spec_from_file_location("readme_rules", ROOT / "tests" / "test_readme.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


RULES = _readme_module()
SECTIONS = [s for s in RULES.SECTIONS if RULES.VLLM_SECTION.match(s.title) and s.code]


BLOCKS = [b for s in SECTIONS for b in s.blocks if b.lang in RULES.RUN]


def test_the_readme_has_one_vllm_section_with_an_offline_and_a_served_block():
    assert len(SECTIONS) == 1 and len(BLOCKS) == 2


@pytest.mark.parametrize("block", BLOCKS, ids=["offline", "served"])
def test_vllm_readme_block_runs(block, server, monkeypatch):
    monkeypatch.chdir(ROOT)
    text = block.text.replace("http://127.0.0.1:8000", server)
    code = compile("\n" * (block.lineno - 1) + text, str(RULES.README), "exec")
    exec(code, {"__name__": "__main__"})  # noqa: S102 - the README's own code
