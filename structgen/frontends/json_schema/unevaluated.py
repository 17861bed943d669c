"""``unevaluatedProperties`` and ``unevaluatedItems`` where what is evaluated is static.

Why it reduces to plain keywords: when no ``anyOf``, ``oneOf``, ``if``, ``$ref`` or
``dependentSchemas`` (for items also ``contains``) decides which members or items its schema
and its ``allOf`` branches evaluate, the evaluated ones are those their ``properties`` name and
``patternProperties`` match (their ``prefixItems`` cover), so the keyword is one more
conjunct: ``additionalProperties`` (``items``) beyond them. ``not`` contributes nothing; an
``additionalProperties``/``items`` or a nested ``unevaluated*`` in them evaluates everything.
Otherwise the keyword is refused, naming it and its pointer (``lenient``: dropped, recorded).

Example
-------
>>> from structgen.frontends.json_schema.keywords import merge
>>> [m.schema() for m in merge([{"allOf": [{"prefixItems": [True]}], "unevaluatedItems": False}])]
[{'prefixItems': [True], 'items': False}]
"""

from __future__ import annotations

from typing import Any

from structgen.errors import SchemaError
from structgen.frontends.json_schema.facts import Gathering, member_rule, raise_refusal
from structgen.frontends.json_schema.terms import Part
from structgen.frontends.json_schema.values import join_pointer

__all__ = ["merge_unevaluated_properties", "merge_unevaluated_items", "DYNAMIC_APPLICATORS"]

#: In-place applicators whose outcome decides which members or items are evaluated: beside one
#: of these, ``unevaluatedProperties``/``unevaluatedItems`` is not static and is refused.
DYNAMIC_APPLICATORS = ("anyOf", "oneOf", "if", "$ref", "$dynamicRef", "$recursiveRef", "dependentSchemas",
                       "dependencies")


def _evaluated(schema: Any, ptr: str, kw: str, dynamic: tuple[str, ...]) -> tuple[list[dict], bool, str | None]:
    """The subschemas whose annotations reach ``kw`` at ``schema`` (it and its ``allOf``
    branches, recursively), whether one of them evaluates everything (its own ``kw``), and the
    pointer of the first applicator in ``dynamic`` among them (``not`` contributes nothing)."""
    found: list[dict] = []
    todo = [(schema, ptr, True)]
    while todo:
        node, at, top = todo.pop(0)
        if not isinstance(node, dict):
            continue  # true/false: no annotation
        if not top and kw in node:
            return found, True, None
        found.append(node)
        where = next((join_pointer(at, d) for d in dynamic if d in node), None)
        if where is not None:
            return found, False, where
        if isinstance(node.get("allOf"), list):
            todo += [(sub, join_pointer(at, "allOf", i), False) for i, sub in enumerate(node["allOf"])]
    return found, False, None


def _unevaluated_refused(g: Gathering, part: Part, kw: str, dynamic: str) -> None:
    """Refuse ``kw`` (``lenient``: drop and record it), naming the applicator that makes it dynamic."""
    applicator = dynamic.rsplit("/", 1)[-1]
    (g.refuse or raise_refusal)(kw, join_pointer(part.pointer, kw),
             f"what it covers depends on `{applicator}` at {dynamic}; {kw} is supported where what is "
             "evaluated is static: the properties, patternProperties, prefixItems and items of its own "
             "schema and its allOf branches (no anyOf, oneOf, if, $ref, dependentSchemas, contains there)")


def _not_in_old_drafts(g: Gathering, part: Part, kw: str) -> bool:
    """Refuse ``kw`` under a declared draft 3 to 7, which does not have it (a validator of that
    draft ignores it, so applying it would reject valid instances; ``lenient``: dropped, as that
    validator does). True when refused."""
    if g.old_draft:
        (g.refuse or raise_refusal)(kw, join_pointer(part.pointer, kw),
                                    f"{kw} is a keyword of drafts 2019-09 and 2020-12, and this schema "
                                    "declares an earlier draft ($schema), whose validators ignore it")
    return g.old_draft


def merge_unevaluated_properties(g: Gathering, part: Part, kw: str) -> None:
    """``unevaluatedProperties`` where the evaluated keys are static (no ``anyOf``, ``oneOf``,
    ``if``, ``$ref``, ``dependentSchemas`` among its schema and ``allOf`` branches): the
    ``additionalProperties`` of the keys named by their ``properties`` and matched by their
    ``patternProperties``; nothing where one of them has ``additionalProperties``."""
    value = part.schema[kw]
    if not isinstance(value, (bool, dict)):
        raise SchemaError(f"{kw} must be a schema", pointer=join_pointer(part.pointer, kw))
    if _not_in_old_drafts(g, part, kw):
        return
    nodes, everything, dynamic = _evaluated(part.schema, part.pointer, kw, DYNAMIC_APPLICATORS)
    if everything or any("additionalProperties" in n for n in nodes):
        return  # every member is evaluated already
    if dynamic is not None:
        return _unevaluated_refused(g, part, kw, dynamic)
    names = {k: True for n in nodes if isinstance(n.get("properties"), dict) for k in n["properties"]}
    patterns = {p: True for n in nodes if isinstance(n.get("patternProperties"), dict) for p in n["patternProperties"]}
    where = join_pointer(part.pointer, kw)
    rule = member_rule(Part({"properties": names, "patternProperties": patterns}, where, True))
    g.members.append((rule[0], rule[1], Part(value, where), rule[3]))
    g.additional_seen = True


def merge_unevaluated_items(g: Gathering, part: Part, kw: str) -> None:
    """``unevaluatedItems`` where the evaluated items are static (as for
    ``unevaluatedProperties``, and no ``contains``): the items after the longest
    ``prefixItems`` (array-form ``items``) of its schema and ``allOf`` branches; nothing where
    one of them has ``items`` for the rest (or ``additionalItems``)."""
    value = part.schema[kw]
    if not isinstance(value, (bool, dict)):
        raise SchemaError(f"{kw} must be a schema", pointer=join_pointer(part.pointer, kw))
    if _not_in_old_drafts(g, part, kw):
        return
    nodes, everything, dynamic = _evaluated(part.schema, part.pointer, kw, DYNAMIC_APPLICATORS + ("contains",))
    if everything or any(isinstance(n.get("items"), (dict, bool)) or "additionalItems" in n and isinstance(n.get("items"), list)
                         for n in nodes):
        return  # every item is evaluated already
    if dynamic is not None:
        return _unevaluated_refused(g, part, kw, dynamic)
    longest = max((len(n[k]) for n in nodes for k in ("prefixItems", "items") if isinstance(n.get(k), list)), default=0)
    where = join_pointer(part.pointer, kw)
    g.arrays.append(([Part(True, join_pointer(where, "~evaluated", i), True) for i in range(longest)], Part(value, where)))
