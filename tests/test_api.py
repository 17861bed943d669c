"""The public API stays honest: ``__all__`` lists exactly what is exported, examples run."""

from __future__ import annotations

import doctest
import importlib
import types

import pytest

import structgen

MODULES = ["structgen", "structgen.core.ir", "structgen.engine.vocab", "structgen.core.automaton", "structgen.engine.pda",
           "structgen.engine.masks", "structgen.engine.matcher", "structgen.engine.compiler", "structgen.frontends.json_schema.translate",
           "structgen.frontends.json_text", "structgen.frontends.regex.ecma", "structgen.core.regular", "structgen.frontends.json_schema.numbers",
           "structgen.frontends.json_schema.formats", "structgen.frontends.json_schema.merge", "structgen.frontends.sql", "structgen.tasks.sql",
           "structgen.decoding.config", "structgen.decoding.stats", "structgen.decoding.backend",
           "structgen.decoding.costs", "structgen.decoding.drafts", "structgen.tasks.results",
           "structgen.tasks.json_task"]


def test_all_lists_every_public_name():
    public = {n for n, v in vars(structgen).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert set(structgen.__all__) == public
    for name in structgen.__all__:
        assert getattr(structgen, name) is not None


def test_errors_form_one_hierarchy():
    for name in ["SchemaError", "UnsupportedFeatureError", "GrammarError", "CompileError",
                 "DecodingError", "IncompleteGenerationError"]:
        assert issubclass(getattr(structgen, name), structgen.StructgenError)
    assert issubclass(structgen.GrammarError, ValueError)
    assert issubclass(structgen.DecodingError, RuntimeError)


def test_compiling_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, structgen; from structgen.engine.vocab import Vocabulary; "
            "v = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256]); "
            "m = structgen.compile_json_schema({'type': 'string'}, v).matcher(); m.mask_words(); "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
