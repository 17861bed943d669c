"""A schema that declares its draft is read with that draft's keywords, and no others.

Why: the compiler reads every keyword of every draft (an undeclared schema may mix spellings),
but a validator of a declared draft ignores the keywords its draft does not have: draft 7's
ignores ``prefixItems``, ``dependentRequired``, ``minContains``; 2020-12's ignores
``dependencies`` and ``additionalItems``; draft 4's ignores ``const``, ``contains``, ``if``.
Applying one would reject instances that draft's validators accept (a wrong verdict). So before
compiling, :func:`for_draft` makes a copy of a declared document without them (as
python-jsonschema's validator of that draft, the oracle, ignores them), and reads draft 3's own
keywords as draft 4 spells them:

- ``divisibleBy`` is ``multipleOf``; ``type: "any"`` (or ``"any"`` in a list) is no type constraint;
- a property's ``required: true`` is its name in the parent's ``required`` list;
- a ``dependencies`` value that is one name is a list of that name;
- ``extends`` (a schema or a list) is ``allOf``; ``type`` entries that are schemas are ``anyOf``
  branches beside the simple types; ``disallow`` is ``not`` of the same (draft 3 has none of
  ``allOf``, ``anyOf``, ``not``, so these names are free). Errors inside them name the draft-4
  pointer (``/allOf/0`` for ``/extends/0``).

The copy declares draft 4 for a draft-3 document (its meaning is now draft 4's: identifiers,
``$ref`` siblings, integers, the enum checks python-jsonschema makes). Only subschemas are
copied (as the draft places them); data (``enum``, unknown keywords) is shared. A ``$ref`` may
point anywhere in the original document, a removed keyword too: :meth:`DraftView.reach` finds
its target there and reads it with the draft (a copy made on demand, once per node).

An undeclared schema is left as it is (:func:`for_draft` returns it).

Example
-------
>>> view = for_draft({"$schema": "http://json-schema.org/draft-07/schema#",
...                   "prefixItems": [{"type": "string"}], "items": {"type": "integer"}})
>>> sorted(view)
['$schema', 'items']
>>> dict(for_draft({"$schema": "http://json-schema.org/draft-03/schema#", "divisibleBy": 2, "type": "any"}))
{'$schema': 'http://json-schema.org/draft-04/schema#', 'multipleOf': 2}
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DraftView", "for_draft", "IGNORED_BY_DRAFT", "draft_of"]

_DRAFT_ORDER = ("draft3", "draft4", "draft6", "draft7", "draft2019-09", "draft2020-12")
_DIALECTS = {
    "json-schema.org/draft-03/schema": "draft3",
    "json-schema.org/draft-04/schema": "draft4",
    "json-schema.org/draft-06/schema": "draft6",
    "json-schema.org/draft-07/schema": "draft7",
    "json-schema.org/draft/2019-09/schema": "draft2019-09",
    "json-schema.org/draft/2020-12/schema": "draft2020-12",
    "json-schema.org/schema": "draft2020-12",
}


def _since(first: str, last: str = "draft2020-12") -> frozenset[str]:
    """The drafts from ``first`` to ``last``."""
    return frozenset(_DRAFT_ORDER[_DRAFT_ORDER.index(first):_DRAFT_ORDER.index(last) + 1])


#: The drafts that have each keyword constraining instances (the compiler's keywords of every
#: draft; python-jsonschema's validators of each draft are the reference).
_HAVE = {
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "not", "multipleOf", "minProperties", "maxProperties", "required"),
                    _since("draft4")),
    **dict.fromkeys(("const", "contains", "propertyNames"), _since("draft6")),
    **dict.fromkeys(("if", "then", "else"), _since("draft7")),
    **dict.fromkeys(("dependentRequired", "dependentSchemas", "minContains", "maxContains", "unevaluatedItems",
                     "unevaluatedProperties"), _since("draft2019-09")),
    "$recursiveRef": _since("draft2019-09", "draft2019-09"),
    **dict.fromkeys(("prefixItems", "$dynamicRef"), _since("draft2020-12")),
    "additionalItems": _since("draft3", "draft2019-09"),
    "dependencies": _since("draft3", "draft7"),
}

#: Per declared draft, the keywords (of other drafts) its validators ignore.
IGNORED_BY_DRAFT = {d: frozenset(k for k, have in _HAVE.items() if d not in have) for d in _DRAFT_ORDER}

#: Where each draft keeps subschemas: one schema, a list of them, an object of them.
_IN_VALUE = frozenset({"additionalItems", "additionalProperties", "contains", "else", "if", "items", "not",
                       "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties",
                       "extends", "type", "disallow"})  # the last three: draft 3
_IN_ARRAY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items", "extends", "type", "disallow"})
_IN_OBJECT = frozenset({"$defs", "definitions", "dependentSchemas", "dependencies", "patternProperties",
                        "properties"})
_DRAFT4 = "http://json-schema.org/draft-04/schema#"


def draft_of(schema: Any) -> str | None:
    """The draft a root ``$schema`` declares (``"draft7"``, ...), or None (none declared, or not
    a JSON Schema draft: the compiler refuses the latter)."""
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(dialect, str):
        return None
    return _DIALECTS.get(re.sub(r"^https?://", "", dialect).removesuffix("#"))


class DraftView(dict):
    """The root of a declared document read with its draft (see the module docstring); it keeps
    the original (:attr:`source`) for :meth:`reach`."""

    def __init__(self, source: dict, draft: str) -> None:
        self.source = source
        self.draft = draft
        self._views: dict[int, Any] = {}  # id(original node) -> its copy
        self._made: set[int] = set()  # ids of the copies
        self._keep: list[Any] = []  # originals viewed (their ids stay theirs)
        super().__init__(self._copy(source, root=True))
        self._made.add(id(self))
        self._views[id(source)] = self

    def reach(self, pointer: str) -> Any:
        """The node at ``pointer`` read with the draft: found in the copy, or else in the
        original (a keyword the draft does not have, draft 3's spellings)."""
        node = self._walk(self, pointer)
        if node is _MISSING:
            node = self._walk(self.source, pointer)
            if node is _MISSING:
                raise KeyError(pointer)
        return self.view(node)

    def view(self, node: Any) -> Any:
        """``node`` (a subschema of the original, or already a copy) read with the draft."""
        if not isinstance(node, dict) or id(node) in self._made:
            return node
        got = self._views.get(id(node))
        if got is None:
            self._keep.append(node)
            self._views[id(node)] = got = self._copy(node, root=False)
            self._made.add(id(got))
        return got

    @staticmethod
    def _walk(node: Any, pointer: str) -> Any:
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                return _MISSING
        return node

    def _copy(self, node: dict, *, root: bool) -> dict:
        ignored = IGNORED_BY_DRAFT[self.draft]
        out = {k: v for k, v in node.items() if k not in ignored}
        for key, value in out.items():
            if key in _IN_VALUE and isinstance(value, dict):
                out[key] = self.view(value)
            elif key in _IN_ARRAY and isinstance(value, list):
                out[key] = [self.view(v) for v in value]
            elif key in _IN_OBJECT and isinstance(value, dict):
                out[key] = {k: self.view(v) for k, v in value.items()}
        if self.draft == "draft3":
            out = _from_draft3(out, node)
            if root:
                out["$schema"] = _DRAFT4
        return out


_MISSING = object()


def _from_draft3(out: dict, node: dict) -> dict:
    """A draft-3 subschema (``out``: its copy, subschemas read already) as draft 4 spells it."""
    extends, disallow = out.pop("extends", None), out.pop("disallow", None)
    if "divisibleBy" in out:
        out["multipleOf"] = out.pop("divisibleBy")
    if "type" in out:
        simple, schemas = _split_types(out.pop("type"))
        if simple is not None and not schemas:
            out["type"] = simple
        elif simple is not None:
            out["anyOf"] = ([{"type": simple}] if simple else []) + schemas
    if disallow is not None:
        simple, schemas = _split_types(disallow)
        if simple is None:  # "any": nothing is allowed
            out["not"] = {}
        else:
            branches = ([{"type": simple}] if simple else []) + schemas
            out["not"] = branches[0] if len(branches) == 1 else {"anyOf": branches}
    if extends is not None:
        out["allOf"] = list(extends) if isinstance(extends, list) else [extends]
    props = out.get("properties")
    if isinstance(props, dict):
        required = [k for k, v in node["properties"].items() if isinstance(v, dict) and v.get("required") is True]
        if required:
            out["required"] = required
    deps = out.get("dependencies")
    if isinstance(deps, dict):
        out["dependencies"] = {k: [v] if isinstance(v, str) else v for k, v in deps.items()}
    return out


def _split_types(types: Any) -> tuple[Any, list]:
    """A draft-3 ``type`` (or ``disallow``) value: the simple types (``None``: ``"any"`` is
    among them, no constraint) and the schema entries (already copied)."""
    entries = types if isinstance(types, list) else [types]
    names = [t for t in entries if isinstance(t, str)]
    schemas = [t for t in entries if not isinstance(t, str)]
    if "any" in names:
        return None, []
    return (types if isinstance(types, str) else names), schemas


def for_draft(schema: Any) -> Any:
    """``schema`` read with the draft its root ``$schema`` declares (a :class:`DraftView`), or
    ``schema`` itself when it declares none (every draft's spelling is read then)."""
    draft = draft_of(schema)
    if draft is None or (draft != "draft3" and not _has_any(schema, IGNORED_BY_DRAFT[draft])):
        return schema
    return DraftView(schema, draft)


def _has_any(schema: Any, keywords: frozenset[str]) -> bool:
    """Whether any dict in ``schema`` has one of ``keywords`` (a cheap test before copying)."""
    todo = [schema]
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if not keywords.isdisjoint(node):
                return True
            todo.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            todo.extend(v for v in node if isinstance(v, (dict, list)))
    return False
