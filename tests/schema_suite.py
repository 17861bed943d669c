"""The official JSON-Schema-Test-Suite (every draft in the data: 2020-12 and 7) run against structgen.

Shared by ``tests/test_schema_suite.py`` (CI assertions) and ``benchmarks/schema_suite.py``
(markdown report). The data is ``json-schema-test-suite/tests/<draft>/`` in the shared data
folder (``../shared/data`` beside the repository, or ``$STRUCTGEN_DATA_DIR``; located as
:mod:`maskbench` does). Each keyword file is a list of groups ``{"description", "schema",
"tests": [{"description", "data", "valid"}]}``.

Scope (:func:`scope`), per draft of :data:`DRAFTS`: every required file (:data:`REQUIRED`), the
``optional/format`` files of :data:`FORMATS`, and the optional files about what is and is not
an identifier or a reference target (:data:`OPTIONAL`). The files of :data:`OUTSIDE_FLOOR`
(``$dynamicRef``, ``unevaluated*``, ``$vocabulary``) are run and reported but kept out of the
compile rate.

How a group is run (:func:`run_group`):

* the suite's draft-7 schemas do not say their draft (the suite's runner knows it), and
  structgen reads a schema without ``$schema`` as 2020-12 does where drafts differ (see
  ``structgen/frontends/json_schema/metaschema.py``): so a root schema object without
  ``$schema`` is given the draft's (:data:`DIALECTS`);
* its schema is compiled with ``compile_json_schema(schema, tokenizer, whitespace="flexible")``;
  the outcome is *compiled*, *refused* (a :class:`structgen.StructgenError`: structgen says it
  cannot honour the schema, which is allowed) or *crashed* (any other exception: a bug);
* for a compiled group, every test instance is serialised twice, compactly
  (:func:`maskbench.compact`) and with ``indent=2`` (:func:`maskbench.indented`), tokenized
  without special tokens and walked token by token; the instance is *accepted* when every token
  is accepted and end-of-sequence is then allowed. A verdict is *wrong* when accepted differs
  from the test's expected validity.

``format`` is given *assertion* semantics, as structgen honours formats. The suite treats
``format`` as an annotation by default in 2020-12 (``format.json`` expects "invalid email string
is only an annotation by default" to be valid); the ``optional/format`` files are the assertion
tests. So in ``format.json`` the tests that the suite itself describes as an *invalid* string of
their format (:data:`_ANNOTATION_ONLY`) are expected to be rejected; each such adjustment is
counted (:attr:`FileResult.adjusted`) and shown in the report.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from maskbench import DATA_DIR, compact, indented

__all__ = [
    "SUITE_ROOT",
    "SUITE_DIR",
    "DRAFTS",
    "DIALECTS",
    "REQUIRED",
    "FORMATS",
    "OPTIONAL",
    "OUTSIDE_FLOOR",
    "SuiteFile",
    "WrongVerdict",
    "GroupResult",
    "FileResult",
    "names",
    "scope",
    "with_dialect",
    "load_groups",
    "run_group",
    "run_file",
    "run_suite",
    "compile_rate",
    "SERIALISATIONS",
]

SUITE_ROOT = DATA_DIR / "json-schema-test-suite" / "tests"
#: The drafts run, newest first (folders below :data:`SUITE_ROOT`).
DRAFTS = ("draft2020-12", "draft7")
#: The ``$schema`` a root schema object of each draft is given when it has none.
DIALECTS = {"draft2020-12": "https://json-schema.org/draft/2020-12/schema",
            "draft7": "http://json-schema.org/draft-07/schema#"}
SUITE_DIR = SUITE_ROOT / "draft2020-12"

_REQUIRED_7 = (
    "additionalItems", "additionalProperties", "allOf", "anyOf", "boolean_schema", "const", "contains",
    "default", "definitions", "dependencies", "enum", "exclusiveMaximum", "exclusiveMinimum", "format",
    "if-then-else", "infinite-loop-detection", "items", "maxItems", "maxLength", "maxProperties", "maximum",
    "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern",
    "patternProperties", "properties", "propertyNames", "ref", "refRemote", "required", "type", "uniqueItems",
)
#: The required (non-optional) keyword files of each draft, by stem.
REQUIRED = {
    "draft2020-12": (
        "additionalProperties", "allOf", "anchor", "anyOf", "boolean_schema", "const", "contains",
        "content", "default", "defs", "dependentRequired", "dependentSchemas", "dynamicRef", "enum",
        "exclusiveMaximum", "exclusiveMinimum", "format", "if-then-else", "infinite-loop-detection",
        "items", "maxContains", "maxItems", "maxLength", "maxProperties", "maximum", "minContains",
        "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern",
        "patternProperties", "prefixItems", "properties", "propertyNames", "ref", "refRemote",
        "required", "type", "unevaluatedItems", "unevaluatedProperties", "uniqueItems", "vocabulary",
    ),
    "draft7": _REQUIRED_7,
}
#: The ``optional/format`` files in scope (format assertion tests), by stem (draft 7 has no
#: ``duration`` or ``uuid``).
FORMATS = {
    "draft2020-12": ("date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
                     "uri", "uri-reference", "unknown"),
    "draft7": ("date", "time", "date-time", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference",
               "unknown"),
}
#: Optional files in scope: an ``$id`` inside an enum or an unknown keyword is no identifier;
#: a ``$ref`` may point into an unknown keyword.
OPTIONAL = {
    "draft2020-12": ("id", "unknownKeyword", "refOfUnknownKeyword"),
    "draft7": ("id", "unknownKeyword"),
}
#: Run and reported, but outside the compile-rate floor.
OUTSIDE_FLOOR = frozenset({"dynamicRef", "unevaluatedItems", "unevaluatedProperties", "vocabulary"})

#: (name, serialiser) of the two spellings walked for every instance.
SERIALISATIONS = (("compact", compact), ("indent2", indented))

#: ``format.json`` tests that only hold under annotation semantics (the data is, by the suite's
#: own description, an invalid string of the format): expected invalid under assertion.
_ANNOTATION_ONLY = re.compile(r"^invalid (\S+) string is only an annotation by default$")


@dataclass(frozen=True)
class SuiteFile:
    """One keyword file: ``name`` is its path below ``<draft>/`` without ``.json``."""

    name: str
    path: Path
    in_floor: bool
    draft: str = "draft2020-12"

    @property
    def key(self) -> str:
        """``<draft>/<name>``: unique over every draft."""
        return f"{self.draft}/{self.name}"


@dataclass(frozen=True)
class WrongVerdict:
    group: str
    test: str
    serialisation: str
    expected: bool
    data: str
    detail: str

    def __str__(self) -> str:
        got = "accepted" if not self.expected else "rejected"
        want = "valid" if self.expected else "invalid"
        return (f"[{self.group}] {self.test} ({self.serialisation}): {want} but {got}; "
                f"data {self.data}; {self.detail}")


@dataclass
class GroupResult:
    description: str
    outcome: str  # "compiled", "refused" or "crashed"
    error_class: str = ""
    reason: str = ""  # refusal keyword / message, or the crash summary
    message: str = ""
    walks: int = 0
    adjusted: int = 0
    wrong: list[WrongVerdict] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(repr=False)
class FileResult:
    file: SuiteFile
    groups: list[GroupResult] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"FileResult({self.name}: {self.compiled}/{self.total} compiled, "
                f"{len(self.wrong)} wrong, {len(self.crashes)} crashed)")

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def total(self) -> int:
        return len(self.groups)

    @property
    def compiled(self) -> int:
        return sum(g.outcome == "compiled" for g in self.groups)

    @property
    def refused(self) -> Counter:
        """Refusals by error class."""
        return Counter(g.error_class for g in self.groups if g.outcome == "refused")

    @property
    def refusal_reasons(self) -> Counter:
        """Refusals by ``Class: keyword`` (or ``Class: message``)."""
        return Counter(f"{g.error_class}: {g.reason}" for g in self.groups if g.outcome == "refused")

    @property
    def crashes(self) -> list[GroupResult]:
        return [g for g in self.groups if g.outcome == "crashed"]

    @property
    def wrong(self) -> list[WrongVerdict]:
        return [w for g in self.groups for w in g.wrong]

    @property
    def walks(self) -> int:
        return sum(g.walks for g in self.groups)

    @property
    def adjusted(self) -> int:
        return sum(g.adjusted for g in self.groups)

    @property
    def seconds(self) -> float:
        return sum(g.seconds for g in self.groups)


# ------------------------------------------------------------------ loading


def names(draft: str = "draft2020-12") -> list[str]:
    """The names of the files in scope for ``draft``, in :func:`scope` order."""
    return (list(REQUIRED[draft]) + [f"optional/format/{n}" for n in FORMATS[draft]]
            + [f"optional/{n}" for n in OPTIONAL[draft]])


def scope(draft: str = "draft2020-12") -> list[SuiteFile]:
    """The files in scope for ``draft``, required files first; a missing file raises
    ``FileNotFoundError``."""
    folder = SUITE_ROOT / draft
    files = [SuiteFile(n, folder / f"{n}.json", n.split("/")[0] not in OUTSIDE_FLOOR, draft) for n in names(draft)]
    missing = [str(f.path) for f in files if not f.path.is_file()]
    if missing:
        raise FileNotFoundError(
            f"JSON-Schema-Test-Suite files not found ({len(missing)}, e.g. {missing[0]}): put the "
            "shared data folder beside the repository or set STRUCTGEN_DATA_DIR")
    return files


def load_groups(file: SuiteFile) -> list[dict[str, Any]]:
    with open(file.path, encoding="utf-8") as f:
        return json.load(f)


# ------------------------------------------------------------------ running


def _short(value: Any, limit: int = 80) -> str:
    text = compact(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reason(err: Exception) -> str:
    keyword = getattr(err, "keyword", None)
    if keyword:
        return keyword
    msg = re.sub(r" \(at JSON pointer '[^']*'\)$", "", str(err))
    return msg if len(msg) <= 60 else msg[:57] + "..."


def _crash_summary(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    where = ""
    for fr in reversed(frames):  # innermost frame inside structgen, else the innermost
        if "/structgen/" in fr.filename.replace("\\", "/"):
            where = f"{Path(fr.filename).name}:{fr.lineno} in {fr.name}"
            break
    if not where and frames:
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}"
    msg = str(err).splitlines()[0][:160] if str(err) else ""
    return f"{type(err).__name__}: {msg} ({where})"


def _encode(tokenizer: Any, vocab: Any, text: str) -> list[int]:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if vocab.token_bytes(ids) != text.encode("utf-8"):
        # A harness problem, not a verdict: the token bytes must spell exactly the text walked.
        raise AssertionError(f"the tokenizer's bytes do not spell the text {text[:80]!r}")
    return ids


def _walk(compiled: Any, ids: list[int]) -> tuple[bool, str]:
    """(accepted, why not) for one tokenized instance; end-of-sequence only at the end."""
    m = compiled.matcher()
    for pos, tid in enumerate(ids):
        if not m.advance(tid):
            return False, f"token {pos} rejected: {m.last_rejection}"
    eos = sorted(compiled.vocabulary.eos_ids)
    if eos:
        if not m.advance(eos[0]):
            return False, f"all tokens accepted, end-of-sequence refused: {m.last_rejection}"
    elif not m.can_end():
        return False, "all tokens accepted, but the value is not complete"
    return True, "all tokens and end-of-sequence accepted"


def _expected(file_name: str, test: dict[str, Any]) -> tuple[bool, bool]:
    """(expected validity under format assertion, whether it differs from the suite's label)."""
    if file_name == "format" and isinstance(test["data"], str) and _ANNOTATION_ONLY.match(test["description"]):
        return False, bool(test["valid"])
    return bool(test["valid"]), False


def with_dialect(schema: Any, draft: str) -> Any:
    """``schema`` with the ``$schema`` of ``draft`` added to a root object that has none."""
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DIALECTS[draft], **schema}
    return schema


def run_group(group: dict[str, Any], tokenizer: Any, *, file_name: str = "",
              draft: str = "draft2020-12") -> GroupResult:
    """Compile one group's schema (in ``draft``) and walk each test instance (see the module
    docstring)."""
    import structgen
    from structgen.engine.vocab import vocabulary_for

    start = time.perf_counter()
    res = GroupResult(description=group["description"], outcome="compiled")
    try:
        compiled = structgen.compile_json_schema(with_dialect(group["schema"], draft), tokenizer,
                                                 whitespace="flexible")
    except structgen.StructgenError as err:
        res.outcome, res.error_class = "refused", type(err).__name__
        res.reason, res.message = _reason(err), str(err)
    except Exception as err:  # noqa: BLE001 - any other exception is a compiler bug, recorded
        res.outcome, res.error_class = "crashed", type(err).__name__
        res.reason = _crash_summary(err)
        res.message = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    if res.outcome != "compiled":
        res.seconds = time.perf_counter() - start
        return res
    vocab = vocabulary_for(tokenizer)
    for test in group["tests"]:
        expected, adjusted = _expected(file_name, test)
        res.adjusted += adjusted
        for ser_name, serialise in SERIALISATIONS:
            ids = _encode(tokenizer, vocab, serialise(test["data"]))
            try:
                accepted, detail = _walk(compiled, ids)
            except Exception as err:  # noqa: BLE001 - a matcher crash is a bug, recorded
                res.outcome, res.error_class = "crashed", type(err).__name__
                res.reason = "while walking: " + _crash_summary(err)
                res.message = "".join(traceback.format_exception(type(err), err, err.__traceback__))
                res.seconds = time.perf_counter() - start
                return res
            res.walks += 1
            if accepted != expected:
                res.wrong.append(WrongVerdict(
                    group["description"], test["description"], ser_name, expected,
                    _short(test["data"]),
                    detail + (" (format.json label flipped: format asserted)" if adjusted else "")))
    res.seconds = time.perf_counter() - start
    return res


def run_file(file: SuiteFile, tokenizer: Any, *, groups: Iterable[int] | None = None) -> FileResult:
    """Run the file's groups (all, or the indices in ``groups``)."""
    loaded = load_groups(file)
    picked = range(len(loaded)) if groups is None else [i for i in groups if i < len(loaded)]
    out = FileResult(file)
    for i in picked:
        out.groups.append(run_group(loaded[i], tokenizer, file_name=file.name, draft=file.draft))
    return out


def run_suite(tokenizer: Any, *, draft: str = "draft2020-12", first_group_only: bool = False) -> dict[str, FileResult]:
    """Every file in :func:`scope` of ``draft``, by name (``first_group_only``: group 0 of each file)."""
    return {f.name: run_file(f, tokenizer, groups=[0] if first_group_only else None) for f in scope(draft)}


#: Keywords of the structures issue (objects, arrays, combinators, references): groups refused
#: for one of these are listed apart from the scalar floor until that issue lands.
STRUCTURE_KEYWORDS = frozenset({
    "allOf", "oneOf", "not", "if", "then", "else", "contains", "minContains", "maxContains",
    "prefixItems", "minItems", "maxItems", "uniqueItems", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "$ref", "false", "anyOf", "required", "unevaluatedItems", "unevaluatedProperties",
    "$dynamicRef",
})


def compile_rate(results: dict[str, FileResult], *, in_floor: bool = True,
                 scalars_only: bool = False) -> tuple[int, int]:
    """(compiled, total) groups over the files inside (or outside) the compile-rate floor;
    ``scalars_only`` leaves out groups refused for a :data:`STRUCTURE_KEYWORDS` keyword."""
    picked = [g for r in results.values() if r.file.in_floor == in_floor for g in r.groups
              if not (scalars_only and g.outcome == "refused" and g.reason in STRUCTURE_KEYWORDS)]
    return sum(g.outcome == "compiled" for g in picked), len(picked)
