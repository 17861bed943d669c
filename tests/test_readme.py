"""README.md runs as written: every ``python`` block is executed, every output it shows is checked,
and its generated blocks (``tools/readme_tables.py``) are current.

Block rules
-----------
* **Sections.** Blocks are grouped by the heading above them (``#``, ``##`` or ``###``) and run in
  README order in one namespace per section: a block may use names that earlier blocks of its
  own section define, never those of another section (each section starts from nothing, so
  each reads on its own). The working directory is the repository root, as for ``make test``
  (``examples/data/shop.sqlite``, ``structgen/grammars/*.lark`` are relative paths).
* **Shown output is checked.** A block whose first line starts with ``>>>`` is a doctest: each
  output it shows must be what the code prints (``doctest`` with ``ELLIPSIS``, so ``...`` stands
  for a part that is long or changes from run to run, e.g. a tool call's random id, and
  ``NORMALIZE_WHITESPACE``, so a long value may wrap at its spaces). Any other ``python`` block
  is executed and may show no output: a comment in it that looks like a value (``# {...``,
  ``# '...``, ``# 42``, ``# True``) fails the test — write the block as a doctest instead.
  Fences indented under a list item count too.
* **The vLLM section** (a heading starting with "vLLM") runs in the vLLM virtualenv, from
  ``tests/with_vllm/test_vllm_readme.py``, not here: vLLM pins its own torch and transformers.
* **Other block kinds are not run**, and a kind not listed here fails the test until it is
  given a rule:
  - ``bash``: ``make demo`` / ``make test`` set up a virtualenv and run the demo or the whole
    suite (minutes; ``make test`` inside ``make test`` would recurse);
  - ``sh``: ``structgen`` command lines (section "Command line"), each loading the model in its
    own process; ``tests/test_cli.py`` checks that they parse and that the files they name
    exist, and runs every subcommand on the model the same way;
  - untagged fences: diagrams (the data-flow sketch under "How it works"), not code.

The real default model
----------------------
A section whose code reaches the model (``Generator(``, ``generate_json(`` and the other
``generate_*``) is marked ``slow`` and runs on the model this test session already loaded: the
conftest fixtures ``smollm2_model`` and ``generator`` are reused, never a second copy.
``smollm2_model`` is the process's shared default (``structgen.decoding.models.default_model``),
so ``structgen.Generator()`` in a block wraps the loaded model (a Generator is cheap around a
loaded model); ``load_default_model`` is monkeypatched to return it too, and ``structgen.api.generator._DEFAULT`` — the
Generator behind ``structgen.generate_*`` — is set to the session's ``generator``.
``PassCosts.measure`` is patched to return the default cost curve, as the ``generator``
fixture does: measuring takes up to a minute on a loaded 2-core runner, and greedy output does
not depend on it (drafting is lossless; only ``stats`` does, so the README shows no stats
values). A section that loads the Gemma 3 tokenizer is ``slow`` too (its first conversion from
the GGUF takes ~20 s; it is cached on disk and memoized in-process, shared with the
``gemma_tokenizer`` fixture).

Shown model output is what greedy decoding on the default model writes; when the model, its
cache format or decoding changes, run ``pytest tests/test_readme.py`` and copy the new outputs.
"""

from __future__ import annotations

import doctest
import importlib.util
import io
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: fence languages and what the runner does with them
RUN = {"python"}
NOT_RUN = {
    "bash": "set-up commands (make demo, make test): minutes, and make test would recurse",
    "": "diagrams, not code",
    "sh": "command lines (structgen ...): each loads the model; tests/test_cli.py checks that they parse "
          "and that their files exist, and runs every subcommand on the model",
}
USES_MODEL = re.compile(r"\bGenerator\(|\bgenerate_(json|grammar|regex|sql|tool_calls)\(")
USES_GEMMA = re.compile(r"\bload_gemma_tokenizer\(")
#: a comment in a plain block that shows a value (a claim nobody checks)
SHOWN_VALUE = re.compile(r"^\s*(->|[{\['\"]|-?\d|True\b|False\b|None\b)")

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
HEADING = re.compile(r"^(#{1,3}) (.*)$")


@dataclass
class Block:
    lang: str
    text: str
    lineno: int  # README line of the block's first line of code (1-based)


@dataclass
class Section:
    title: str
    lineno: int
    blocks: list[Block] = field(default_factory=list)

    @property
    def code(self) -> str:
        return "\n".join(b.text for b in self.blocks if b.lang in RUN)


def read_sections(text: str) -> list[Section]:
    """The README's sections, each with its fenced blocks (dedented) in order."""
    sections = [Section("(top)", 1)]
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            indent, lang = fence["indent"], fence["lang"]
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                raise AssertionError(f"README.md:{i + 1}: unclosed ``` fence")
            body = textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"
            if indent and any(ln.strip() and not ln.startswith(indent) for ln in lines[i + 1:end]):
                raise AssertionError(f"README.md:{i + 1}: a fenced line is indented less than its fence")
            sections[-1].blocks.append(Block(lang, body, i + 2))
            i = end + 1
            continue
        heading = HEADING.match(line)
        if heading:
            sections.append(Section(heading[2].strip(), i + 1))
        i += 1
    return [s for s in sections if s.blocks]


SECTIONS = read_sections(README.read_text())
#: sections whose code runs beside vLLM (tests/with_vllm/test_vllm_readme.py)
VLLM_SECTION = re.compile(r"^vLLM\b")
RUNNABLE = [s for s in SECTIONS if s.code and not VLLM_SECTION.match(s.title)]
# test ids are the headings' slugs: two sections with code under one heading name would clash
assert len({s.title.lower() for s in RUNNABLE}) == len(RUNNABLE), "README: two code sections share a heading"


def _param(section: Section):
    slow = USES_MODEL.search(section.code) or USES_GEMMA.search(section.code)
    slug = re.sub(r"[^a-z0-9]+", "-", section.title.lower()).strip("-")
    return pytest.param(section, id=slug, marks=[pytest.mark.slow] if slow else [])


def test_readme_generated_blocks_are_current():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "tools" / "readme_tables.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    readme = README.read_text()
    assert tool.render(readme) == readme, "README.md is stale: run `make readme`"


def test_readme_block_kinds_have_rules():
    """Every fenced block's kind is either run or skipped for a stated reason (NOT_RUN)."""
    kinds = {b.lang for s in SECTIONS for b in s.blocks}
    unknown = kinds - RUN - set(NOT_RUN)
    assert not unknown, f"README blocks of kind {sorted(unknown)} have no rule in tests/test_readme.py"
    assert RUNNABLE, "no python block found in README.md"


def test_readme_plain_blocks_show_no_unchecked_output():
    """Output shown in a block must be checked, so only doctest blocks may show it."""
    bad = []
    for s in SECTIONS:
        for b in s.blocks:
            if b.lang in RUN and not b.text.lstrip().startswith(">>>"):
                for k, line in enumerate(b.text.splitlines()):
                    comment = line.partition("#")[2]
                    if comment and SHOWN_VALUE.match(comment):
                        bad.append(f"README.md:{b.lineno + k}: {line.strip()}")
    assert not bad, "plain blocks show values nobody checks (make them doctests):\n" + "\n".join(bad)


@pytest.fixture
def shared_model(request, monkeypatch):
    """Route every default-model load in README code to the session's model (module docstring)."""
    import structgen
    import structgen.api.generator as api
    import structgen.decoding.loop as loop
    import structgen.decoding.models as models

    model, tokenizer = request.getfixturevalue("smollm2_model")
    generator = request.getfixturevalue("generator")
    monkeypatch.setattr(models, "load_default_model", lambda **_: (model, tokenizer))
    monkeypatch.setattr(loop.PassCosts, "measure", staticmethod(lambda *a, **k: loop.PassCosts()))
    monkeypatch.setattr(api, "_DEFAULT", generator)
    return structgen


@pytest.mark.parametrize("section", [_param(s) for s in RUNNABLE])
def test_readme_section_runs(section: Section, request, monkeypatch):
    monkeypatch.chdir(ROOT)
    if USES_MODEL.search(section.code):
        request.getfixturevalue("shared_model")
    namespace: dict = {"__name__": "__readme__"}
    parser = doctest.DocTestParser()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for block in section.blocks:
        if block.lang not in RUN:
            continue
        where = f"README.md:{block.lineno}"
        if block.text.lstrip().startswith(">>>"):
            test = parser.get_doctest(block.text, namespace, where, str(README), block.lineno - 1)
            report = io.StringIO()
            runner = doctest.DocTestRunner(optionflags=flags)
            result = runner.run(test, out=report.write, clear_globs=False)
            namespace.update(test.globs)  # DocTest ran on a copy; later blocks see its names
            assert result.failed == 0, f"{where}: shown output differs\n{report.getvalue()}"
        else:
            code = compile("\n" * (block.lineno - 1) + block.text, str(README), "exec")
            exec(code, namespace)  # noqa: S102 - the README's own code
