"""Every schema is checked against its draft's metaschema before it is compiled.

Why: the compiler reads the keywords it knows and would skip a value of the wrong shape
(``"uniqueItems": 1``, ``"additionalProperties": null``, a 2020-12 ``"exclusiveMinimum": true``)
as if the keyword were absent: a constraint dropped silently. A malformed value is refused here
instead, with a :class:`~structgen.errors.SchemaError` naming the keyword, the value and its JSON
pointer. ``lenient=True`` does not relax this (it is about keywords structgen cannot honour in
a valid schema, not about invalid schemas).

Which metaschema (:func:`drafts_for`):

- a root ``$schema`` of drafts 3 to 2020-12 (any scheme, with or without ``#``; the bare
  ``json-schema.org/schema`` is 2020-12): that draft's;
- no ``$schema``: 2020-12's; where it complains, draft 7's and then draft 4's may vouch for the
  schema instead: accepted when that draft's metaschema accepts the schema *and* every 2020-12
  complaint is about a keyword of that draft, reached through keywords of that draft (a keyword
  the older draft lacks, such as ``contains`` or ``$defs`` in draft 4, must still be well-formed
  by 2020-12, since the compiler reads it). Schemas in the wild that say no draft often use
  draft-4 spellings (``"exclusiveMinimum": true`` beside ``minimum``, array-form ``items``), and
  the compiler reads an undeclared schema in every draft's spelling where they do not conflict
  (draft-4 boolean bounds, array-form ``items`` with ``additionalItems``, ``dependencies``,
  ``definitions``): so what passes here, the compiler honours. Otherwise it is refused with
  2020-12's complaint;
- any other ``$schema``: not checked here; the compiler refuses it (its vocabularies are unknown).

Not checked: duplicates in ``enum``, ``required`` or a ``type`` list (draft 4 forbids them; they
change no meaning, and real schemas have them) and ``format`` of keyword values (the ``regex``
format would hold ECMA-262 patterns to Python's ``re``; the compiler parses patterns itself).

Cost: a schema is first checked by a validator fastjsonschema compiles from the metaschema
(2020-12 flattened, drafts 4 to 7 as they are), about five times faster than python-jsonschema
(MaskBench's 11,305 schemas under 2020-12: 6.7 against 35 s); where it finds nothing wrong, that
is the answer. Making that validator costs ~5 ms per draft, once per process (it is built to
say pass or fail only). ``tests/test_schema_checks.py`` holds it to never passing what
python-jsonschema refuses, under four drafts, on MaskBench schemas and the JSON-Schema-Test-Suite's
schemas and instances, and to leaving the schema untouched (``use_default=False``).
Only what it refuses, or a schema with tuples for arrays (fastjsonschema takes a tuple for an
array, python-jsonschema does not), is checked by python-jsonschema, whose errors say what and
where. The code fastjsonschema generates comes from the metaschemas, never from user input.
python-jsonschema walks the schema once per metaschema tried, linear in its size. The
2020-12 metaschema is checked in one flattened document (:func:`_flat_2020_12`), 5x faster than
python-jsonschema's own, which resolves each ``$dynamicRef`` through the dynamic scope. The
check recurses per nesting level, so a schema nested deeper than :data:`PIECE_DEPTH`
subschemas is checked in pieces: each subschema at that depth is checked on its own (the
metaschema of every subschema is the root's), with ``{}`` in its place above; a container met
twice (Python objects may share one) is checked once.

Example
-------
>>> check_metaschema({"$schema": "https://json-schema.org/draft/2020-12/schema", "uniqueItems": 1})
Traceback (most recent call last):
...
structgen.errors.SchemaError: malformed schema: 'uniqueItems' must be a boolean, not 1 (by the draft 2020-12 metaschema) (at JSON pointer '/uniqueItems')
>>> check_metaschema({"type": "number", "minimum": 0, "exclusiveMinimum": True})  # draft 4's spelling
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterator

from jsonschema import (Draft3Validator, Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator,
                        Draft202012Validator)
from jsonschema.exceptions import ValidationError, best_match, relevance

try:
    import fastjsonschema
except ImportError:  # the metaschema check runs on python-jsonschema alone, slower
    fastjsonschema = None

from structgen.errors import SchemaError, shown
from structgen.frontends.json_schema.refs import subschemas
from structgen.frontends.json_schema.values import join_pointer

__all__ = ["check_metaschema", "drafts_for", "PIECE_DEPTH"]

#: Subschema nesting checked in one piece (python-jsonschema recurses about ten frames per level
#: under the 2020-12 metaschema; Python's default limit is 1000 frames).
PIECE_DEPTH = 24

_DRAFTS = {
    "json-schema.org/draft-03/schema": Draft3Validator,
    "json-schema.org/draft-04/schema": Draft4Validator,
    "json-schema.org/draft-06/schema": Draft6Validator,
    "json-schema.org/draft-07/schema": Draft7Validator,
    "json-schema.org/draft/2019-09/schema": Draft201909Validator,
    "json-schema.org/draft/2020-12/schema": Draft202012Validator,
    "json-schema.org/schema": Draft202012Validator,
}
_UNDECLARED = (Draft202012Validator, Draft7Validator, Draft4Validator)
_NAMES = {Draft3Validator: "draft 3", Draft4Validator: "draft 4", Draft6Validator: "draft 6",
          Draft7Validator: "draft 7", Draft201909Validator: "draft 2019-09", Draft202012Validator: "draft 2020-12"}
_CHECKERS: dict[type, Any] = {}


def drafts_for(schema: Any) -> tuple[type, ...]:
    """The python-jsonschema validator classes whose metaschemas ``schema`` is checked against
    (it must fit one); empty for a ``$schema`` that names no JSON Schema draft."""
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if dialect is None:
        return _UNDECLARED
    if not isinstance(dialect, str):
        return (Draft202012Validator,)  # the metaschema says what $schema must be
    return tuple(v for k, v in _DRAFTS.items() if k == re.sub(r"^https?://", "", dialect).removesuffix("#"))


def check_metaschema(schema: Any, *, lists_only: bool = False) -> None:
    """Raise :class:`~structgen.errors.SchemaError` unless ``schema`` fits the metaschema of its
    draft (see :func:`drafts_for`); the message names the keyword, the value and its pointer.
    ``lists_only``: the caller knows every array in ``schema`` is a list, not a tuple, so the
    fast validator's verdict holds (see the module docstring)."""
    drafts = drafts_for(schema)
    if not drafts:
        return
    errors = _errors(schema, drafts[0], everything=len(drafts) > 1, fast=lists_only)
    if not errors:
        return
    for cls in drafts[1:]:
        # An undeclared schema may be in an older draft's spelling: accepted when that draft's
        # metaschema accepts it and each of 2020-12's complaints is about a keyword of that
        # draft (one it does not have, such as a later draft's, must still be well-formed).
        known = cls.META_SCHEMA.get("properties", {})
        left = [(e, at) for e, at in errors if not _keywords_on(schema, at + tuple(e.absolute_path)) <= known.keys()]
        if not left and not _errors(schema, cls, everything=False):
            return
        errors = left or errors
    top, at = max(errors, key=lambda found: relevance(found[0]))
    error = best_match([top])  # into anyOf/oneOf branches, as python-jsonschema picks
    what, plain = _describe(error)
    said = "" if plain else f": {_short(error.message)}"
    also = (f"; nor does it fit the {' or '.join(_NAMES[c] for c in drafts[1:])} metaschema"
            if len(drafts) > 1 else "")
    raise SchemaError(f"malformed schema: {what} (by the {_NAMES[drafts[0]]} metaschema{said}{also})",
                      pointer=join_pointer("", *at, *error.absolute_path)) from error


def _checker(cls: type) -> Any:
    got = _CHECKERS.get(cls)
    if got is None:
        meta = cls.META_SCHEMA
        if cls is Draft202012Validator:
            try:
                meta = _flat_2020_12()
            except (RuntimeError, LookupError):  # a later layout: the original, slower, is as right
                pass
        _CHECKERS[cls] = got = cls(meta)
    return got


def _fast_checker(cls: type) -> Callable[[Any], Any] | None:
    """fastjsonschema's validator of ``cls``'s metaschema, or None (not installed, or a draft it
    does not read: 3, and 2019-09's ``$recursiveRef``)."""
    if cls not in _FAST:
        _FAST[cls] = None
        if fastjsonschema is not None and cls in (Draft4Validator, Draft6Validator, Draft7Validator,
                                                  Draft202012Validator):
            meta = cls.META_SCHEMA
            if cls is Draft202012Validator:
                try:
                    meta = _refs_beside(_flat_2020_12())
                except (RuntimeError, LookupError):
                    return None
            # use_default=False: it would write the metaschema's defaults into the schema checked.
            # detailed_exceptions=False: only pass or fail is read here, and the detailed code
            # spells the metaschema out in every raise: 6x the source, ~25 ms more per draft.
            _FAST[cls] = fastjsonschema.compile(meta, use_formats=False, use_default=False,
                                                detailed_exceptions=False)
    return _FAST[cls]


def _refs_beside(node: Any) -> Any:
    """``node`` with each ``$ref`` that has sibling keywords moved into an ``allOf`` beside them:
    the same under 2020-12, and fastjsonschema, which reads schemas as draft 7 does, ignores a
    ``$ref``'s siblings (``$id``'s ``pattern`` in the 2020-12 core vocabulary)."""
    if isinstance(node, list):
        return [_refs_beside(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):  # keys are names, not keywords
            out[key] = {name: _refs_beside(v) for name, v in value.items()}
        elif key in _DATA_KEYWORDS:
            out[key] = value
        else:
            out[key] = _refs_beside(value)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out["allOf"] = [*out.get("allOf", []), {"$ref": ref}]
    return out


def _passes(quick: Callable[[Any], Any], piece: Any) -> bool:
    try:
        quick(piece)
    except Exception:  # a complaint, or a piece too deep for it: python-jsonschema says which
        return False
    return True


_FAST: dict[type, Callable[[Any], Any] | None] = {}
_NAMED_SUBSCHEMAS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
_DATA_KEYWORDS = {"enum", "const", "default", "examples"}


#: What a 2020-12 vocabulary metaschema says besides its keywords and their ``$defs``.
_VOCABULARY_HEADER = {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "title", "type", "$comment"}


def _flat_2020_12() -> dict[str, Any]:
    """The 2020-12 metaschema as one document: its seven vocabularies' keywords and ``$defs``
    merged, ``$dynamicRef: "#meta"`` as ``$ref: "#"``. It accepts the same schemas (the dynamic
    anchor only matters to a metaschema that extends this one) and is several times faster to
    check against: python-jsonschema resolves every ``$dynamicRef`` through the dynamic scope,
    and a MaskBench schema's check took a fifth of its compile.

    >>> from jsonschema import Draft202012Validator as V
    >>> V(_flat_2020_12()).is_valid({"type": "object", "properties": {"a": {"minItems": -1}}})
    False
    """
    from jsonschema_specifications import REGISTRY

    top = Draft202012Validator.META_SCHEMA
    flat: dict[str, Any] = {"$schema": top["$schema"], "type": top["type"], "properties": {}, "$defs": {}}
    docs = [REGISTRY[f"https://json-schema.org/draft/2020-12/{part['$ref']}"].contents for part in top["allOf"]]
    for doc in docs + [{k: v for k, v in top.items() if k != "allOf"}]:
        extra = set(doc) - _VOCABULARY_HEADER - {"properties", "$defs"}
        if extra or doc.get("type", top["type"]) != top["type"]:
            raise RuntimeError(f"unexpected 2020-12 metaschema layout: {sorted(extra)}")
        for key in ("properties", "$defs"):
            for name, value in doc.get(key, {}).items():
                if name in flat[key]:
                    raise RuntimeError(f"2020-12 metaschema: {key} {name!r} defined twice")
                flat[key][name] = _local_refs(value)
    return flat


def _local_refs(node: Any) -> Any:
    """``node`` with references into the 2020-12 vocabulary documents made local to the flat one."""
    if isinstance(node, list):
        return [_local_refs(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$dynamicRef" and value == "#meta":
            out["$ref"] = "#"
        elif key == "$ref" and isinstance(value, str):
            out["$ref"] = "#" + value.partition("#")[2]  # "meta/validation#/$defs/x", "#/$defs/x"
        else:
            out[key] = _local_refs(value)
    return out


def _duplicates_only(error: ValidationError) -> bool:
    """Whether ``error`` only says that an array has duplicates (directly, or as the reason a
    branch of ``anyOf``/``oneOf`` failed): let be (see the module docstring). A validator class
    extended with a lax ``uniqueItems`` would not do: python-jsonschema switches back to the
    metaschema's own class on each ``$ref`` to it."""
    if error.validator == "uniqueItems":
        return True
    if error.validator in ("anyOf", "oneOf") and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        return any(all(_duplicates_only(e) for e in errs) for errs in branches.values())
    return False


def _errors(schema: Any, cls: type, *, everything: bool,
            fast: bool = False) -> list[tuple[ValidationError, tuple[Any, ...]]]:
    """The metaschema errors in ``schema`` (every one, or only the most relevant of the first
    piece that has any), each with the path of its piece (its own path is below that).
    ``fast``: a piece the fast validator passes has none."""
    checker = _checker(cls)
    quick = _fast_checker(cls) if fast else None
    found = []
    for piece, path in _pieces(schema):
        if quick is not None and _passes(quick, piece):
            continue
        try:
            errors = [e for e in checker.iter_errors(piece) if not _duplicates_only(e)]
        except RecursionError as err:  # values nested deeper than Python's recursion limit
            raise SchemaError("the schema is nested too deeply to be checked against its metaschema",
                              pointer=join_pointer("", *path)) from err
        if everything:
            found += [(e, path) for e in errors]
        elif errors:
            return [(best_match(errors), path)]
    return found


def _keywords_on(schema: Any, path: tuple[Any, ...]) -> set[Any]:
    """The keywords on the way to the value at ``path``: each subschema's step into the next, and
    the keyword the value belongs to (``{"$defs", "type"}`` for ``/$defs/a/type``)."""
    node, keywords, i = schema, set(), 0
    while i < len(path):
        keywords.add(path[i])
        step = next((p for p, _ in subschemas(node) if p == tuple(path[i:i + len(p)]) and len(p) + i < len(path)),
                    None)
        if step is None:
            break
        for part in step:
            node = node[part]
        i += len(step)
    return keywords


def _pieces(schema: Any) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """``schema`` cut into pieces at most :data:`PIECE_DEPTH` subschemas deep, with their
    paths (see the module docstring); one piece, ``schema`` itself, when it is shallower."""
    seen: set[int] = set()
    todo: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while todo:
        node, path = todo.pop()
        yield _cut(node, path, PIECE_DEPTH, todo, seen), path


def _cut(node: Any, where: tuple[Any, ...], depth: int, todo: list[tuple[Any, tuple[Any, ...]]],
         seen: set[int]) -> Any:
    """``node`` with the subschemas ``depth`` levels down (and containers met before) replaced
    by ``{}``, each pushed on ``todo``; ``node`` itself when nothing was replaced."""
    if not isinstance(node, dict):
        return node
    seen.add(id(node))
    copy: dict[str, Any] | None = None
    for path, child in subschemas(node):
        if not isinstance(child, dict):
            continue
        if id(child) in seen:
            new: Any = {}
        elif depth <= 1:
            seen.add(id(child))
            todo.append((child, where + path))
            new = {}
        else:
            new = _cut(child, where + path, depth - 1, todo, seen)
            if new is child:
                continue
        if copy is None:
            copy = dict(node)
        if len(path) == 1:
            copy[path[0]] = new
        else:
            key, member = path
            if copy[key] is node[key]:
                copy[key] = list(node[key]) if isinstance(node[key], list) else dict(node[key])
            copy[key][member] = new
    return node if copy is None else copy


_TYPE_NAMES = {"object": "an object", "array": "an array", "string": "a string", "number": "a number",
               "integer": "an integer", "boolean": "a boolean", "null": "null"}


def _describe(error: ValidationError) -> tuple[str, bool]:
    """What is wrong, by keyword (``'uniqueItems' must be a boolean, not 1``), and whether that
    says it all (else the metaschema's own message is added)."""
    path = list(error.absolute_path)
    if not path:
        what = "the schema"
    elif isinstance(path[-1], int):
        what = f"item {path[-1]} of {path[-2]!r}" if len(path) > 1 else f"item {path[-1]}"
    else:
        what = repr(path[-1])
    try:
        value = _short(json.dumps(error.instance, default=repr))
    except (ValueError, RecursionError):  # an integer past Python's 4,300 digits, deep nesting
        value = shown(error.instance)
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{what} must be {' or '.join(_TYPE_NAMES.get(t, t) for t in types)}, not {value}", True
    if error.validator in ("minimum", "exclusiveMinimum"):
        least = "above" if error.validator == "exclusiveMinimum" else "at least"
        return f"{what} must be {least} {error.validator_value}, not {value}", True
    if error.validator == "enum":
        return f"{what} must be one of {_short(json.dumps(error.validator_value))}, not {value}", True
    if error.validator == "pattern":
        return f"{what} must match {error.validator_value!r}, not {value}", True
    if error.validator == "minItems":
        return f"{what} must have at least {error.validator_value} item(s), not {value}", True
    if error.validator in ("dependencies", "dependentRequired"):
        return f"{error.message} (in {what})", True
    return f"{what} is malformed: {value}", False


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
