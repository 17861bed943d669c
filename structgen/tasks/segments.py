"""A structural tag's output cut back into its segments: which format wrote which text.

The grammar accepted the text, so a parse exists; this finds one, left to right with
backtracking. Each primitive format (``const_string``, ``json_schema``, ``regex``,
``grammar``, ``any_text``) is tried as a language of its own, compiled over a byte vocabulary
and walked forward from where it starts: every place where it may end is a candidate, shortest
first (free text ends at the first place the rest parses, as the grammar's free text stops at
the first trigger or end string).

Example
-------
>>> from structgen.frontends.structural_tag import read_structural_tag
>>> tag = read_structural_tag({"type": "sequence", "elements": [
...     {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
...     {"type": "json_schema", "json_schema": {"type": "integer"}}]})
>>> [(s.kind, s.text, s.value) for s in segments_of(tag, "<think>2+2</think>4")]
[('const_string', '<think>', '<think>'), ('any_text', '2+2', '2+2'), ('const_string', '</think>', '</think>'), ('json_schema', '4', 4)]
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Iterator

from structgen.engine.compiled import CompiledGrammar
from structgen.engine.vocab import Vocabulary
from structgen.errors import ParseError
from structgen.frontends.structural_tag import StructuralTag, structural_tag_grammar

__all__ = ["Segment", "segments_of"]

_BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
#: parse steps allowed before giving up (outputs are a model's answer: short)
_MAX_STEPS = 200_000


@dataclass(frozen=True)
class Segment:
    """One primitive format's part of the output.

    ``kind`` is the format's type; ``pointer`` its JSON pointer in the spec; ``text`` what it
    wrote (``start``:``end`` in the output's characters); ``value`` the parsed JSON for a
    ``json_schema``, else the text; ``tag`` the ``begin`` of the innermost enclosing tag.
    """

    kind: str
    pointer: str
    text: str
    value: Any
    start: int
    end: int
    tag: str | None = None


def segments_of(tag: StructuralTag, text: str) -> list[Segment]:
    """The segments of ``text``, an output the structural tag's grammar accepted.

    Raises :class:`~structgen.errors.ParseError` when no parse is found (text the grammar
    refuses, or a parse past the step limit).
    """
    parser = _Parser(text)
    for end, found in parser.parse(tag.format, tag.root, 0, (), None):
        if end == len(text):
            return list(found)
    raise ParseError(f"the output does not parse as the structural tag: {text[:200]!r}")


@functools.lru_cache(maxsize=256)
def _language(fmt_json: str) -> CompiledGrammar:
    from structgen.frontends.structural_tag import read_structural_tag

    return CompiledGrammar(structural_tag_grammar(read_structural_tag(json.loads(fmt_json))), _BYTES)


def _value_of(fmt: dict[str, Any], piece: str) -> Any:
    """A segment's value: parsed JSON (or XML arguments) for a ``json_schema``, else the text."""
    if fmt["type"] != "json_schema":
        return piece
    if fmt.get("style", "json") == "json":
        return json.loads(piece)
    from structgen.frontends.xml_arguments import read_xml_arguments

    schema = fmt["json_schema"]
    return read_xml_arguments(piece, fmt["style"], json.loads(schema) if isinstance(schema, str) else schema)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.steps = 0

    def parse(self, fmt: dict[str, Any], ptr: str, i: int, stops: tuple[str, ...],
              tag: str | None) -> Iterator[tuple[int, tuple[Segment, ...]]]:
        """Every (end, segments) of a parse of ``fmt`` from ``i``, shortest first."""
        self.steps += 1
        if self.steps > _MAX_STEPS:
            raise ParseError("the output is too ambiguous to cut into segments within the step limit")
        kind = fmt["type"]
        if kind in ("const_string", "json_schema", "regex", "grammar", "any_text"):
            yield from self._leaf(fmt, ptr, i, stops, tag)
        elif kind == "sequence":
            yield from self._sequence(fmt["elements"], f"{ptr}/elements", 0, i, stops, tag)
        elif kind == "or":
            for k, sub in enumerate(fmt["elements"]):
                yield from self.parse(sub, f"{ptr}/elements/{k}", i, stops, tag)
        elif kind in ("optional", "plus", "star", "repeat"):
            lo, hi = {"optional": (0, 1), "plus": (1, None), "star": (0, None)}.get(kind, (0, 0))
            if kind == "repeat":
                lo, hi = fmt["min"], (None if fmt["max"] == -1 else fmt["max"])
            yield from self._repeat(fmt["content"], ptr + "/content", i, lo, hi, stops, tag, 0)
        elif kind == "tag":
            yield from self._tag(fmt, ptr, i, fmt["begin"])
        elif kind == "tags_with_separator":
            yield from self._separated(fmt, ptr, i)
        else:  # triggered_tags, dispatch
            yield from self._dispatched(fmt, ptr, i, stops, tag, first=True)

    def _leaf(self, fmt, ptr, i, stops, tag):
        kind = fmt["type"]
        if kind == "const_string":
            if self.text.startswith(fmt["value"], i):
                end = i + len(fmt["value"])
                yield end, (Segment(kind, ptr, fmt["value"], fmt["value"], i, end, tag),)
            return
        alone = dict(fmt)
        if kind == "any_text":
            alone["excludes"] = list(fmt.get("excludes", ())) + list(stops)
        m = _language(json.dumps(alone)).matcher()  # key order is meaning (properties): not sorted
        j = i
        while True:
            if m.can_end():
                piece = self.text[i:j]
                value = _value_of(fmt, piece)
                # empty free text is no segment
                yield j, (Segment(kind, ptr, piece, value, i, j, tag),) if piece or kind != "any_text" else ()
            if j == len(self.text) or not all(m.advance(b) for b in self.text[j].encode()):
                return
            j += 1

    def _sequence(self, items, ptr, k, i, stops, tag):
        if k == len(items):
            yield i, ()
            return
        last = k == len(items) - 1
        for j, head in self.parse(items[k], f"{ptr}/{k}", i, stops if last else (), tag):
            for end, rest in self._sequence(items, ptr, k + 1, j, stops, tag):
                yield end, head + rest

    def _repeat(self, fmt, ptr, i, lo, hi, stops, tag, done):
        if done >= lo:
            yield i, ()
        if hi is not None and done >= hi:
            return
        for j, head in self.parse(fmt, ptr, i, stops, tag):
            if j == i:  # an empty repetition adds nothing
                continue
            for end, rest in self._repeat(fmt, ptr, j, lo, hi, stops, tag, done + 1):
                yield end, head + rest

    def _tag(self, fmt, ptr, i, begin):
        if not self.text.startswith(begin, i):
            return
        ends = fmt["end"] if isinstance(fmt["end"], list) else [fmt["end"]]
        opened = Segment("const_string", ptr + "/begin", begin, begin, i, i + len(begin), begin)
        stops = tuple(e for e in ends if e)
        for j, inner in self.parse(fmt["content"], ptr + "/content", i + len(begin), stops, begin):
            for e in ends:
                if self.text.startswith(e, j):
                    closed = Segment("const_string", ptr + "/end", e, e, j, j + len(e), begin)
                    yield j + len(e), (opened, *inner, closed)

    def _separated(self, fmt, ptr, i):
        def one(at):
            for k, t in enumerate(fmt["tags"]):
                yield from self._tag({"type": "tag", **t}, f"{ptr}/tags/{k}", at, t["begin"])

        def tail(at):
            yield at, ()
            if fmt.get("stop_after_first") or not self.text.startswith(fmt["separator"], at):
                return
            sep = fmt["separator"]
            mark = (Segment("const_string", ptr + "/separator", sep, sep, at, at + len(sep)),) if sep else ()
            for j, head in one(at + len(sep)):
                for end, rest in tail(j):
                    yield end, mark + head + rest

        if not fmt.get("at_least_one"):
            yield i, ()
        for j, head in one(i):
            for end, rest in tail(j):
                yield end, head + rest

    def _dispatched(self, fmt, ptr, i, stops, tag, first):
        """Free text, then a pattern and its format, then (``loop``) free text again, ..."""
        if fmt["type"] == "triggered_tags":
            rules = [(t["begin"], {"type": "tag", **t}, f"{ptr}/tags/{k}") for k, t in enumerate(fmt["tags"])]
            loop = not fmt.get("stop_after_first")
            triggers = tuple(fmt["triggers"])
            if first and fmt.get("at_least_one"):
                for begin, t, where in rules:
                    for j, found in self._tag(t, where, i, begin):
                        if fmt.get("stop_after_first"):
                            yield j, found
                        else:
                            for end, rest in self._dispatched(fmt, ptr, j, stops, tag, first=False):
                                yield end, found + rest
                return
        else:
            rules = [(p, sub, f"{ptr}/rules/{k}/1") for k, (p, sub) in enumerate(fmt["rules"])]
            loop = fmt.get("loop", True)
            triggers = tuple(p for p, _, _ in rules)
        free = {"type": "any_text", "excludes": list(triggers) + list(fmt.get("excludes", ()))}
        for j, text in self._leaf(free, ptr, i, stops, tag):
            yield j, text
            for pattern, sub, where in rules:
                if not self.text.startswith(pattern, j):
                    continue
                marker = Segment("const_string", where, pattern, pattern, j, j + len(pattern), tag)
                if sub["type"] == "tag":  # the pattern is the tag's begin
                    found = self._tag(sub, where, j, sub["begin"])
                    marker_part: tuple[Segment, ...] = ()
                else:
                    found = self.parse(sub, where, j + len(pattern), (), pattern)
                    marker_part = (marker,)
                for k, inner in found:
                    if loop:
                        for end, rest in self._dispatched(fmt, ptr, k, stops, tag, first=False):
                            yield end, text + marker_part + inner + rest
                    else:
                        yield k, text + marker_part + inner
