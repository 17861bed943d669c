"""``$ref`` inside one schema document: base URIs from ``$id``, JSON pointers and anchors.

Why here and not in python-jsonschema's ``referencing``: the compiler needs the JSON *pointer* of
each target (rules, memo keys and error messages are named by it), which ``referencing``
does not give; the draft-specific reading of ``$id`` (``id`` in drafts 3 and 4, ``$id: "#name"``
as an anchor in drafts 6 and 7) is kept here as the suite tests it.

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
from typing import Any

from structgen.errors import SchemaError, UnsupportedFeatureError
from structgen.frontends.json_schema.terms import Part
from structgen.frontends.json_schema.values import join_pointer

__all__ = ["resolve_ref"]


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
    legacy: bool = False  # drafts 3 and 4 spell $id as id

    def base_at(self, root: Any, ptr: str) -> str:
        """The base URI in force at ``ptr`` (the ``$id`` of the nearest resource around it)."""
        got = self.bases.get(ptr)
        if got is None:
            base, node = _own_id(root, "", self.legacy), root
            for part in ptr.split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                try:
                    node = node[int(part)] if isinstance(node, list) else node[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    break
                base = _own_id(node, base, self.legacy)
            self.bases[ptr] = got = base
        return got


def _own_id(node: Any, base: str, legacy: bool) -> str:
    """The base URI inside ``node``: its ``$id`` (drafts 3-4: ``id``) resolved against ``base``."""
    if isinstance(node, dict):
        ident = node.get("id" if legacy else "$id")
        if isinstance(ident, str) and not ident.startswith("#"):
            return urllib.parse.urldefrag(_join_uri(base, ident))[0]
    return base


_DOCUMENTS: dict[int, tuple[Any, _Document]] = {}
_VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # JSON values, not schemas


def _document(root: Any) -> _Document:
    got = _DOCUMENTS.get(id(root))
    if got is not None and got[0] is root:
        return got[1]
    dialect = root.get("$schema") if isinstance(root, dict) else None
    doc = _Document(legacy=isinstance(dialect, str) and any(f"/draft-0{d}/" in dialect for d in "34"))
    id_keyword = "id" if doc.legacy else "$id"

    def walk(node: Any, pointer: str, base: str) -> None:
        if isinstance(node, dict):
            base = _own_id(node, base, doc.legacy)
            doc.resources.setdefault(base, pointer)
            ident = node.get(id_keyword)
            if isinstance(ident, str) and ident.startswith("#") and len(ident) > 1:  # drafts 4-7 anchor
                doc.anchors.setdefault((base, ident[1:]), pointer)
            for kw in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(kw), str):
                    doc.anchors.setdefault((base, node[kw]), pointer)
            for key, child in node.items():
                if key not in _VALUE_KEYWORDS:
                    walk(child, join_pointer(pointer, key), base)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, join_pointer(pointer, i), base)

    walk(root, "", "")
    doc.resources.setdefault(_own_id(root, "", doc.legacy), "")
    if len(_DOCUMENTS) > 64:
        _DOCUMENTS.clear()
    _DOCUMENTS[id(root)] = (root, doc)
    return doc
