"""The public API stays honest: ``__all__`` lists exactly what is exported, examples run."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import types

import pytest

import structgen

#: Every module of the package: each one's docstring examples run (the vLLM adapters only where vLLM is
#: installed: they run inside it; tests/with_vllm/ tests them in its virtualenv).
_VLLM = importlib.util.find_spec("vllm")
MODULES = ["structgen"] + sorted(m.name for m in pkgutil.walk_packages(structgen.__path__, "structgen.")
                                 if not m.name.startswith("structgen.integrations.vllm")
                                 or (_VLLM is not None and _VLLM.origin is not None))


def test_all_lists_every_public_name():
    public = {n for n, v in vars(structgen).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    lazy = {"LogitsProcessor", "drafted_generate"}  # imported on first use (it needs transformers): import structgen stays light
    assert set(structgen.__all__) == public | lazy
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


BYTES = structgen.Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


@pytest.mark.parametrize("call, error", [
    (lambda: structgen.compile_json_schema({}, BYTES, whitespace="none"), structgen.OptionError),
    (lambda: structgen.compile_regex("a", BYTES).matcher().rollback(1), structgen.OptionError),
    (lambda: structgen.Vocabulary([b"a"], eos_ids=[5]), structgen.OptionError),
    (lambda: structgen.ToolFormat(**{**vars(structgen.TOOL_FORMATS["hermes"]), "trigger": "<x>"}),
     structgen.OptionError),
    (lambda: __import__("structgen.frontends.tool_calls", fromlist=["parse_calls"]).parse_calls(
        structgen.TOOL_FORMATS["hermes"], "<tool_call>\n{oops"), structgen.ParseError),
    (lambda: structgen.compile_json_schema("{not json", BYTES), structgen.SchemaError),
    (lambda: structgen.compile_grammar("start: nope", BYTES), structgen.GrammarError),
])
def test_public_calls_raise_typed_errors(call, error):
    """A public call given a bad argument raises structgen's typed error (still a ValueError)."""
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, structgen.StructgenError) and isinstance(info.value, ValueError)


def test_compile_json_schema_takes_a_pydantic_model():
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    m = structgen.compile_json_schema(Person, BYTES, whitespace="compact", canonical=True).matcher()
    assert all(m.advance(b) for b in b'{"name":"Ada","age":36}') and m.can_end()
    assert structgen.compile_json_schema(Person, BYTES).matcher().validate(list(b'{"name":1')) == 8  # not a string
