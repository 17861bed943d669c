"""``$ref`` inside one schema document: base URIs from ``$id``, JSON pointers and anchors.

What each draft means by an identifier or an anchor is ``referencing``'s (python-jsonschema's
resolver library): ``id`` in drafts 3 and 4, ``$id`` later, ignored beside ``$ref`` up to draft
7; ``$id: "#name"`` as an anchor up to draft 7, ``$anchor`` (and ``$dynamicAnchor`` in
2020-12) after. Finding targets stays here: the compiler needs the JSON *pointer* of each
target (rules, memo keys and error messages are named by it), which ``referencing`` does not
give, and only the document's own resources are reached (a remote reference is refused).

A document that declares no draft is read with 2020-12 identifiers (python-jsonschema's default
for it) and anchors of both spellings; where it also has draft-4 ``id`` identifiers, each
``$ref`` is resolved both ways, and one whose readings name different targets is a SchemaError
naming it (one reading found: that one). A declared draft's document comes as a
:class:`~structgen.frontends.json_schema.drafts.DraftView`, targets read with its draft.

Only subschemas are resources: an ``$id`` (or anchor) counts where a schema stands (the value of
``not``, ``items``, an ``allOf`` entry, a ``properties`` value ... :func:`subschemas`), not inside
``enum``/``const`` values or unknown keywords, whose content is data (JSON-Schema-Test-Suite
``optional/unknownKeyword``, ``optional/id``); a ``$ref`` may still point into such content.

Example
-------
>>> doc = {"$id": "http://x.org/root", "$defs": {"a": {"$id": "a", "$anchor": "top", "type": "null"}}}
>>> resolve_ref(doc, "a#top", "/properties/p").pointer, resolve_ref(doc, "#/$defs/a", "").pointer
('/$defs/a', '/$defs/a')
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Iterator

from referencing import Specification
from referencing.jsonschema import DRAFT3, DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012

from structgen.errors import SchemaError, UnsupportedFeatureError
from structgen.frontends.json_schema.drafts import DraftView
from structgen.frontends.json_schema.terms import Part
from structgen.frontends.json_schema.values import join_pointer

__all__ = ["resolve_ref", "subschemas"]


def resolve_ref(root: Any, ref: Any, ptr: str) -> Part:
    """The subschema a ``$ref`` at ``ptr`` names, inside the document ``root``.

    The reference is resolved against the base URI at ``ptr`` (each ``$id`` on the way there
    sets it), then looked up among the document's own resources: a JSON pointer (``~0``/``~1``,
    percent-encoding) or an anchor (``$anchor``, ``$dynamicAnchor``, or a draft 6/7 ``$id:
    "#name"``) in the resource it names. A reference to anything outside the document (a remote
    schema, a metaschema) is refused.
    """
    where = join_pointer(ptr, "$ref")
    if not isinstance(ref, str):
        raise SchemaError(f"$ref must be a string, not {ref!r}", pointer=where)
    doc = _document(root)
    if doc.legacy is None:
        return _resolve_in(doc, root, ref, where, ptr)
    # No draft declared, and draft-4 identifiers (``id``) in it: read both ways; where they
    # disagree on the target, refused rather than guessed (one would be a wrong target).
    found: list[Part | None] = []
    errors: list[SchemaError] = []
    for reading in (doc, doc.legacy):
        try:
            found.append(_resolve_in(reading, root, ref, where, ptr))
        except SchemaError as err:
            found.append(None)
            errors.append(err)
    now, old = found
    if now is not None and old is not None and now.pointer != old.pointer:
        raise SchemaError(f"$ref {ref!r} is ambiguous in a schema that declares no draft: read with "
                          f"2020-12 identifiers it names {now.pointer or '/'!r}, with draft-4 'id' identifiers "
                          f"{old.pointer or '/'!r}; declare the draft with \"$schema\"", pointer=where)
    if now is not None or old is not None:
        return now or old  # type: ignore[return-value]
    raise errors[0]


def _resolve_in(doc: _Document, root: Any, ref: str, where: str, ptr: str) -> Part:
    uri, fragment = urllib.parse.urldefrag(_join_uri(doc.base_at(root, ptr), ref))
    fragment = urllib.parse.unquote(fragment)  # a URI fragment: %25 is "%"
    resource = doc.resources.get(uri)
    if resource is None:
        raise UnsupportedFeatureError("$ref", pointer=where,
                                      hint=f"{ref!r} names a schema outside this document "
                                           f"({uri or 'the document'}); only references inside it are supported")
    if fragment and not fragment.startswith("/"):  # "#name": an anchor, not a pointer
        target = doc.anchors.get((uri, fragment))
        if target is None:
            raise SchemaError(f"$ref {ref!r}: no $anchor named {fragment!r} in the document", pointer=where)
        return Part(_node_at(root, target, ref, where), target)
    target = resource + fragment
    return Part(_node_at(root, target, ref, where), target)


def _node_at(root: Any, pointer: str, ref: str, where: str) -> Any:
    if isinstance(root, DraftView):  # a declared draft: the target read with it
        try:
            return root.reach(pointer)
        except KeyError as err:
            raise SchemaError(f"$ref {ref!r} does not resolve", pointer=where) from err
    node = root
    try:
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
    except (KeyError, IndexError, ValueError, TypeError) as err:
        raise SchemaError(f"$ref {ref!r} does not resolve", pointer=where) from err
    return node


def _join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986; a fragment-only reference keeps any base,
    a URN's too, which ``urljoin`` would drop)."""
    if ref.startswith("#"):
        return urllib.parse.urldefrag(base)[0] + ref
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", ref):
        return ref
    return urllib.parse.urljoin(base, ref)


@dataclass
class _Document:
    """The resources (``$id``) and anchors of one schema document, by absolute URI."""

    resources: dict[str, str] = field(default_factory=lambda: {"": ""})  # URI -> pointer
    anchors: dict[tuple[str, str], str] = field(default_factory=dict)  # (URI, name) -> pointer
    bases: dict[str, str] = field(default_factory=dict)  # pointer -> base URI (memo)
    spec: Specification = DRAFT202012  # the draft: how it spells identifiers
    #: how it spells anchors: a document that declares no draft has both spellings read
    anchor_specs: tuple[Specification, ...] = (DRAFT202012,)
    #: no draft declared, and a draft-4 ``id`` in a schema position: the document read with
    #: draft-4 identifiers too (a ``$ref`` whose two readings disagree is refused)
    legacy: _Document | None = None

    def base_at(self, root: Any, ptr: str) -> str:
        """The base URI in force at ``ptr`` (the ``$id`` of the nearest resource around it):
        identifiers count on the way while the path runs through subschemas; inside data (an
        unknown keyword, an ``enum``), none does."""
        got = self.bases.get(ptr)
        if got is None:
            base, node, at = _own_id(root, "", self.spec), root, "schema"
            for part in ptr.split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                try:
                    child = node[int(part)] if isinstance(node, list) else node[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    break
                at = _position(at, part, child)
                if at == "schema":
                    base = _own_id(child, base, self.spec)
                node = child
            self.bases[ptr] = got = base
        return got


#: Keywords whose value is one subschema, an array of subschemas, an object of subschemas: the
#: spellings of every draft, as the compiler reads them all (``items`` of drafts 4 to 2019-09 is
#: an array of subschemas too; ``dependencies`` values that are arrays of names are not schemas).
_IN_VALUE = frozenset({"additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if",
                       "items", "not", "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties"})
_IN_ARRAY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_IN_OBJECT = frozenset({"$defs", "definitions", "dependentSchemas", "dependencies", "patternProperties",
                        "properties"})


def subschemas(node: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """The subschemas directly inside the schema ``node``, each with its path below it
    (``("not",)``, ``("allOf", 0)``, ``("properties", "a")``); data (``enum``, unknown keywords)
    holds none.

    >>> [p for p, _ in subschemas({"not": {}, "allOf": [True], "x-a": {"not": {}}, "enum": [{}]})]
    [('not',), ('allOf', 0)]
    """
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in _IN_VALUE and isinstance(value, (dict, bool)):
            yield (key,), value
        elif key in _IN_ARRAY and isinstance(value, list):
            yield from (((key, i), v) for i, v in enumerate(value) if isinstance(v, (dict, bool)))
        elif key in _IN_OBJECT and isinstance(value, dict):
            yield from (((key, k), v) for k, v in value.items() if isinstance(v, (dict, bool)))


def _position(at: str | None, key: str, child: Any) -> str | None:
    """What ``child`` (under ``key`` of a node that is ``at``) is: ``"schema"``, ``"members"`` (an
    array or object of subschemas) or None (data)."""
    if at == "members":
        return "schema" if isinstance(child, (dict, bool)) else None
    if at != "schema":
        return None
    if key in _IN_VALUE and isinstance(child, (dict, bool)):
        return "schema"
    if (key in _IN_ARRAY and isinstance(child, list)) or (key in _IN_OBJECT and isinstance(child, dict)):
        return "members"
    return None


#: The keywords ``referencing`` reads identifiers and anchors from (only string values are passed
#: on: a property named ``$id`` inside ``properties`` is no identifier).
_ID_KEYWORDS = ("$id", "id", "$anchor", "$dynamicAnchor", "$ref")
_DRAFTS = {"draft-03": DRAFT3, "draft-04": DRAFT4, "draft-06": DRAFT6, "draft-07": DRAFT7,
           "draft/2019-09": DRAFT201909}


def _identifiers(node: dict) -> dict[str, str]:
    return {k: node[k] for k in _ID_KEYWORDS if isinstance(node.get(k), str)}


def _own_id(node: Any, base: str, spec: Specification) -> str:
    """The base URI inside ``node``: its identifier as the draft reads it, resolved against ``base``."""
    if isinstance(node, dict):
        ident = spec.id_of(_identifiers(node))
        if isinstance(ident, str) and not ident.startswith("#"):
            return urllib.parse.urldefrag(_join_uri(base, ident))[0]
    return base


def _specification(root: Any) -> tuple[Specification, tuple[Specification, ...]]:
    """The draft ``root`` declares (``$schema``, any scheme, with or without ``#``) for
    identifiers and anchors; with none declared, 2020-12 identifiers and the anchors of both
    spellings (``$anchor`` and drafts 6/7 ``$id: "#name"``), as schemas in the wild mix them."""
    dialect = root.get("$schema") if isinstance(root, dict) else None
    if isinstance(dialect, str):
        for name, spec in _DRAFTS.items():
            if f"json-schema.org/{name}/" in dialect:
                return spec, (spec,)
        if "json-schema.org/" in dialect:
            return DRAFT202012, (DRAFT202012,)
    return DRAFT202012, (DRAFT202012, DRAFT7)


_DOCUMENTS: dict[int, tuple[Any, _Document]] = {}


def _document(root: Any) -> _Document:
    got = _DOCUMENTS.get(id(root))
    if got is not None and got[0] is root:
        return got[1]
    spec, anchor_specs = _specification(root)
    doc, legacy_ids = _read(root, spec, anchor_specs)
    if legacy_ids and not (isinstance(root, dict) and "$schema" in root):
        doc.legacy = _read(root, DRAFT4, (DRAFT4,))[0]
    if len(_DOCUMENTS) > 64:
        _DOCUMENTS.clear()
    _DOCUMENTS[id(root)] = (root, doc)
    return doc


def _read(root: Any, spec: Specification, anchor_specs: tuple[Specification, ...]) -> tuple[_Document, bool]:
    """The resources and anchors of ``root`` read with ``spec``, and whether some subschema has a
    draft-4 ``id`` (a string)."""
    doc = _Document(spec=spec, anchor_specs=anchor_specs)
    legacy_ids = False
    todo: list[tuple[Any, str, str]] = [(root, "", "")]  # (subschema, pointer, base around it)
    while todo:  # depth first, in document order: the first resource of a URI is the one
        node, pointer, base = todo.pop()
        if not isinstance(node, dict):
            continue
        legacy_ids = legacy_ids or isinstance(node.get("id"), str)
        base = _own_id(node, base, doc.spec)
        doc.resources.setdefault(base, pointer)
        for spec in doc.anchor_specs:
            for anchor in spec.anchors_in(_identifiers(node)):
                if anchor.name:
                    doc.anchors.setdefault((base, anchor.name), pointer)
        todo.extend(reversed([(child, join_pointer(pointer, *path), base) for path, child in subschemas(node)]))
    doc.resources.setdefault(_own_id(root, "", doc.spec), "")
    return doc, legacy_ids
