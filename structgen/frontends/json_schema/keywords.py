"""The JSON Schema keywords structgen reads: one registry entry per keyword.

Each :class:`~structgen.frontends.json_schema.registry.Keyword` holds the keyword's support
status and README note, whether ``lenient=True`` may drop it, its merge into the facts of a
conjunction (:mod:`~structgen.frontends.json_schema.facts`), its expansion in the disjunctive
normal form (applicators, :mod:`~structgen.frontends.json_schema.dnf`), its negation
(:mod:`~structgen.frontends.json_schema.negation`) and the lowering that reads it. Adding a
keyword is adding an entry here (and its merge or negation beside the others). The sets the
rest of the frontend reads (:data:`SUPPORTED_KEYWORDS`, :data:`LENIENT_KEYWORDS`, ...) and the
README's keyword table (:func:`keyword_table`) come from the entries.

Keywords outside the registry are annotations or vendor extensions (``title``, ``x-...``,
draft-4 ``id``): they constrain nothing, and are ignored as the spec says.

Example
-------
>>> KEYWORDS["minItems"].lenient, KEYWORDS["minItems"].lower.__name__, "$dynamicRef" in SUPPORTED_KEYWORDS
(True, 'array_expr', False)
>>> [m.schema() for m in merge([{"properties": {"a": {}}, "unevaluatedProperties": False}])]
[{'properties': {'a': {}}, 'additionalProperties': False}]
"""

from __future__ import annotations

from typing import Any

from structgen.frontends.json_schema.arrays import array_expr
from structgen.frontends.json_schema.dnf import Merger
from structgen.frontends.json_schema.facts import (Merged, merge_contains, merge_count, merge_enum, merge_format,
                                                   merge_items, merge_members, merge_numbers, merge_pattern,
                                                   merge_property_names, merge_required, merge_type,
                                                   merge_unique)
from structgen.frontends.json_schema.formats import FORMAT_NOTES
from structgen.frontends.json_schema.negation import (flip, negate_all_of, negate_any_of, negate_contains,
                                                      negate_dependencies, negate_items, negate_members,
                                                      negate_multiple_of, negate_not, negate_one_of,
                                                      negate_properties, negate_ref, negate_required,
                                                      negate_string, negate_type, negate_values, negated_with)
from structgen.frontends.json_schema.objects import MAX_KEY_REGIONS, object_expr
from structgen.frontends.json_schema.registry import Keyword, Registry
from structgen.frontends.json_schema.scalars import literal, number_expr, string_expr
from structgen.frontends.json_schema.terms import Conj, Part
from structgen.frontends.json_schema.unevaluated import merge_unevaluated_items, merge_unevaluated_properties
from structgen.frontends.json_schema.values import join_pointer

__all__ = ["KEYWORDS", "SUPPORTED_KEYWORDS", "ASSERTION_KEYWORDS", "LENIENT_KEYWORDS", "LOCAL_KEYWORDS",
           "keyword_table", "merge"]

#: Every JSON Schema keyword (drafts 4 to 2020-12) that constrains instances, in the order
#: their merges and expansions run.
KEYWORDS = Registry([
    Keyword("type", "any",
            note="one type or a list (`[\"string\", \"null\"]`); `integer` is a number with a zero "
                 "fraction (`1.0` accepted when walking; generation writes `1`)",
            merge=merge_type, negate=negate_type),
    Keyword("const", "any",
            note="as `enum` with one value",
            merge=merge_enum, negate=negate_values, lower=literal),
    Keyword("enum", "any",
            note="any JSON values, compared by JSON equality (`1` = `1.0`; objects in any key order "
                 "when walking); values failing sibling keywords are dropped",
            merge=merge_enum, negate=negate_values, lower=literal),
    Keyword("properties", "object",
            note="generation writes defined keys in schema order, then additional ones (every peer "
                 "fixes order); walking (validating) takes the members in any order, each defined key "
                 "at most once (the keys written kept beside the parse state, any number of them); "
                 "a property whose schema matches nothing (`false`, `not: {}`) is a forbidden key",
            merge=merge_members, negate=negate_properties, lower=object_expr),
    Keyword("additionalProperties", "object",
            note="true / false / a schema; spec default true (generation closes "
                 "objects unless the schema opens them)",
            merge=merge_members, negate=negate_members, lower=object_expr),
    Keyword("patternProperties", "object",
            note="additional keys split by the patterns they match (key automata: "
                 "patterns intersected, the others subtracted), each region valued by its "
                 "patterns' subschemas; a defined key matching a pattern answers to both; "
                 f"up to {MAX_KEY_REGIONS} regions (sets of patterns one key matches) per object",
            merge=merge_members, negate=negate_members, lower=object_expr),
    Keyword("unevaluatedProperties", "object",
            note="where the keys it covers are static (no `anyOf`, `oneOf`, `if`, `$ref`, `dependentSchemas` "
                 "beside it or in its `allOf` branches): `additionalProperties` over the keys named or matched "
                 "by the `properties`/`patternProperties` of its schema and its `allOf` branches (none when one "
                 "has `additionalProperties`); otherwise refused (`lenient=True`: dropped)",
            lenient=True, merge=merge_unevaluated_properties, lower=object_expr, checked_with=frozenset({"allOf"})),
    Keyword("propertyNames", "object",
            note="every key automaton intersected with the string language of its schema; "
                 "a defined key it rejects is forbidden",
            lenient=True, merge=merge_property_names, negate=negate_members, lower=object_expr),
    Keyword("minProperties", "object",
            note="members counted in the object's rules (per member position and count "
                 "written); a member is offered only while the count can still end in range",
            lenient=True, merge=merge_count("min_properties", lower=True), negate=flip("object", "maxProperties", -1), lower=object_expr),
    Keyword("maxProperties", "object",
            note="as `minProperties`",
            lenient=True, merge=merge_count("max_properties", lower=False), negate=flip("object", "minProperties", 1), lower=object_expr),
    Keyword("required", "object",
            note="any key; one not listed in `properties` takes the `additionalProperties` schema "
                 "(any value when there is none); only binds objects",
            merge=merge_required, negate=negate_required, lower=object_expr),
    Keyword("items", "array",
            note="one schema for every item (after `prefixItems`); `false`: no more items. The "
                 "array form of drafts 4 to 2019-09 reads as `prefixItems`, with `additionalItems`",
            merge=merge_items, negate=negate_items, lower=array_expr),
    Keyword("prefixItems", "array",
            note="a schema per position; items past the array's end are not required",
            merge=merge_items, lower=array_expr),
    Keyword("additionalItems", "array",
            note="the items after an array-form `items` (ignored otherwise, as the spec says)",
            merge=merge_items, lower=array_expr),
    Keyword("unevaluatedItems", "array",
            note="where the items it covers are static (as `unevaluatedProperties`, and no `contains`): `items` "
                 "after the longest `prefixItems` of its schema and its `allOf` branches (none when one has `items`); "
                 "otherwise refused (`lenient=True`: dropped)",
            lenient=True, merge=merge_unevaluated_items, lower=array_expr, checked_with=frozenset({"allOf"})),
    Keyword("minItems", "array",
            note="a counter beside the array rule's state, any size (beside `contains` or "
                 "`uniqueItems`: in the counting automaton's states, up to 4096)",
            lenient=True, merge=merge_count("min_items", lower=True), negate=flip("array", "maxItems", -1), lower=array_expr),
    Keyword("maxItems", "array",
            note="as `minItems`",
            lenient=True, merge=merge_count("max_items", lower=False), negate=flip("array", "minItems", 1), lower=array_expr),
    Keyword("contains", "array",
            note="each item either matches it or not (the `not` of its schema, which must be exact "
                 "as for `not`), the matches counted; `minContains`/`maxContains` bound the count; "
                 "up to 3 `contains` on one array (from `allOf` or negations), each element classed "
                 "by the subset it matches",
            lenient=True, merge=merge_contains, negate=negate_contains, lower=array_expr),
    Keyword("minContains", "array",
            note="with `contains`",
            lenient=True, merge=merge_contains, negate=negated_with, lower=array_expr),
    Keyword("maxContains", "array",
            note="with `contains`",
            lenient=True, merge=merge_contains, negate=negated_with, lower=array_expr),
    Keyword("uniqueItems", "array",
            note="exact where every item is one of a finite set of values (`enum`, `const`, "
                 "booleans, null; at most 12): the rule tracks the set written. Otherwise "
                 "refused (`lenient=True`: dropped)",
            lenient=True, merge=merge_unique, lower=array_expr),
    Keyword("minLength", "string",
            note="code points, whatever their JSON spelling; beside `pattern`/`format` a "
                 "product automaton, refused when too large",
            lenient=True, merge=merge_count("min_length", lower=True), negate=flip("string", "maxLength", -1), lower=string_expr),
    Keyword("maxLength", "string",
            note="as `minLength`",
            lenient=True, merge=merge_count("max_length", lower=False), negate=flip("string", "minLength", 1), lower=string_expr),
    Keyword("pattern", "string",
            note="ECMA-262 (`u` flag) on the decoded string, unanchored search; lookaround, "
                 "backreferences, `\\b`, `\\p{..}` refused",
            lenient=True, merge=merge_pattern, negate=negate_string, lower=string_expr),
    Keyword("format", "string",
            note="exact regular languages, see the format table; other formats JSON Schema defines "
                 "refused; custom formats (`byte`, `int32`, ...) are annotations: not checked, "
                 "recorded in `relaxed`",
            lenient=True, merge=merge_format, negate=negate_string, lower=string_expr),
    Keyword("minimum", "number",
            note="exact digit-by-digit automaton, integers and decimals, as written in the schema",
            merge=merge_numbers, negate=flip("number", "exclusiveMaximum", 0), lower=number_expr),
    Keyword("maximum", "number",
            note="as `minimum`",
            merge=merge_numbers, negate=flip("number", "exclusiveMinimum", 0), lower=number_expr),
    Keyword("exclusiveMinimum", "number",
            note="as `minimum` (draft-4 boolean form too)",
            merge=merge_numbers, negate=flip("number", "maximum", 0), lower=number_expr),
    Keyword("exclusiveMaximum", "number",
            note="as `minimum` (draft-4 boolean form too)",
            merge=merge_numbers, negate=flip("number", "minimum", 0), lower=number_expr),
    Keyword("multipleOf", "number",
            note="remainder counter intersected with the range; integers and decimals; refused "
                 "above 4096 counter states",
            lenient=True, merge=merge_numbers, negate=negate_multiple_of, lower=number_expr),
    Keyword("$ref", "reference",
            note="inside the document: resolved against the `$id` base URIs around it (relative paths, "
                 "URNs), then a JSON pointer (`~0`/`~1`, percent-encoding) or an anchor (`$anchor`, "
                 "draft 6/7 `$id: \"#name\"`) in that resource; remote references refused; "
                 "recursion without depth limit; keywords beside it apply too (merged as `allOf`, the "
                 "2019-09+ reading). A document declaring drafts 3 to 7 is read as its draft says "
                 "(keywords beside `$ref` ignored), except under `strict=True` (generation's default), "
                 "where they apply: what is generated then meets both readings",
            negate=negate_ref),
    Keyword("allOf", "applicator",
            note="merged into one schema, exactly: types intersected, `properties` key by key (a "
                 "branch's `additionalProperties` governs the keys that branch does not list), "
                 "`required` united, bounds and lengths the tightest, `multipleOf` the least common "
                 "multiple, every `pattern`/`format` intersected, `enum` values kept when valid under "
                 "every branch; no common type is a `SchemaError` naming both pointers",
            expand=Merger.expand_all_of, negate=negate_all_of),
    Keyword("anyOf", "applicator",
            note="branches that match nothing are dropped; beside other keywords, those are merged "
                 "into each branch (as `allOf`)",
            expand=Merger.expand_any_of, negate=negate_any_of),
    Keyword("oneOf", "applicator",
            note="an `anyOf` when the branches (siblings merged in) are provably disjoint: by type, "
                 "`enum`/`const` values, numeric or length ranges, or a property required on both sides "
                 "whose values are disjoint (a discriminator); otherwise each branch and the `not` of "
                 "those it may overlap, where that negation is exact (see `not`); otherwise refused "
                 "(`lenient=True`: read as `anyOf`, recorded)",
            lenient=True, expand=Merger.expand_one_of, negate=negate_one_of),
    Keyword("if", "applicator",
            note="read as `(if and then) or (not if and else)`: exact where `not if` is (see `not`); "
                 "otherwise refused (`lenient=True`: the negation dropped, recorded)",
            lenient=True, expand=Merger.expand_if),
    Keyword("then", "applicator",
            note="with `if`",
            lenient=True),
    Keyword("else", "applicator",
            note="with `if`",
            lenient=True),
    Keyword("dependentRequired", "object",
            note="per key: the key absent, or present with the keys it requires (a "
                 "disjunction merged like `anyOf`)",
            lenient=True, expand=Merger.expand_dependencies, negate=negate_dependencies),
    Keyword("dependentSchemas", "applicator",
            note="per key: the key absent, or present and the schema holds",
            lenient=True, expand=Merger.expand_dependencies, negate=negate_dependencies),
    Keyword("dependencies", "applicator",
            note="draft 4 to 7: an array value as `dependentRequired`, a schema as `dependentSchemas`",
            lenient=True, expand=Merger.expand_dependencies, negate=negate_dependencies),
    Keyword("not", "applicator",
            note="of `type` (`not: {type: integer}`: numbers with a non-zero fraction), of `enum`/`const` "
                 "over strings, numbers, booleans, null (each value out in every spelling; numbers then "
                 "without exponents), `false`; of `required` (a key absent), `properties` (a key present "
                 "whose value is `not` its schema), `items` of one schema (some item `not` it, as "
                 "`contains`), `pattern` and known `format`s (strings outside the automaton: its "
                 "complement), `multipleOf` (numbers spelt without exponent, the multiples taken out), "
                 "`additionalProperties`, `patternProperties` and `propertyNames` (the object must have "
                 "a member that breaks them: up to 4 such members, tracked as bits beside the member "
                 "count), numeric bounds, lengths and item counts (the bound flipped, or another type); "
                 "through `not`, `anyOf`, `allOf`, `$ref` by De Morgan. "
                 "`not: {}` matches nothing (dropped inside `anyOf`, as an optional property: a "
                 "forbidden key); any other form refused",
            lenient=True, expand=Merger.expand_not, negate=negate_not),
    # refused: UnsupportedFeatureError naming the keyword and its JSON pointer
    Keyword("$dynamicRef", "reference"),
    Keyword("$recursiveRef", "reference"),
])

#: Keywords structgen honours (the others of :data:`ASSERTION_KEYWORDS` are refused).
SUPPORTED_KEYWORDS = KEYWORDS.supported
#: Keywords of JSON Schema that constrain instances: one not supported raises UnsupportedFeatureError.
ASSERTION_KEYWORDS = KEYWORDS.assertions
#: Keywords that ``lenient=True`` may drop when structgen cannot honour them, recording each on
#: the compiled grammar (``CompiledGrammar.relaxed``). Each only narrows what is valid, so
#: dropping one widens the language: outputs may then fail the schema. Off by default.
LENIENT_KEYWORDS = KEYWORDS.lenient
#: Keywords merged into one schema's facts (each constrains one kind of value).
LOCAL_KEYWORDS = KEYWORDS.local


def merge(schemas: list[Any], root: Any = None) -> list[Merged]:
    """The merged alternatives of ``allOf: schemas`` (``$ref`` resolved in ``root``)."""
    parts = tuple(Part(s, join_pointer("/allOf", i)) for i, s in enumerate(schemas))
    return Merger({"allOf": schemas} if root is None else root, KEYWORDS).alternatives(Conj(parts))


def keyword_table() -> str:
    """The README's keyword tables (markdown), generated from the registry and the formats."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| keyword | status | reading |", "|---|---|---|"]
    for kw in sorted(KEYWORDS, key=lambda k: k.name.lower()):
        if kw.supported:
            status = "supported (where refused, `lenient=True` drops it)" if kw.lenient else "supported"
            rows.append(f"| `{kw.name}` | {status} | {cell(kw.note or '')} |")
    for kw in sorted(KEYWORDS, key=lambda k: k.name.lower()):
        if not kw.supported:
            status = "refused (`lenient=True` drops it, recorded)" if kw.lenient else "refused"
            rows.append(f"| `{kw.name}` | {status} | `UnsupportedFeatureError` naming the keyword and its JSON pointer |")
    rows.append("| `$schema` | read | a JSON Schema draft (3 to 2020-12) is read as above, with the keywords "
                "of that draft only: those of other drafts are ignored as its validators ignore them "
                "(`prefixItems`, `dependentRequired`, `minContains`, `unevaluated*` under draft 7; `const`, "
                "`contains`, `if` under draft 4; `dependencies`, `additionalItems` under 2020-12); draft 3's "
                "`divisibleBy`, `type: \"any\"`, schema `type` entries, `disallow`, `extends`, per-property "
                "`required` and one-name `dependencies` as draft 4 spells them (`multipleOf`, `anyOf`, `not`, "
                "`allOf`, `required`). No `$schema`: every draft's spelling is read; a `$ref` whose target "
                "differs with draft-4 `id` identifiers is refused. Any other metaschema is refused (its "
                "vocabularies are unknown) |")
    rows.append("| annotations, unknown keywords | ignored | `title`, `description`, `default`, `x-…`, "
                "…: they constrain nothing, as the spec says |")
    formats = ["| format | reading |", "|---|---|"]
    formats += [f"| `{name}` | {cell(note)} |" for name, note in FORMAT_NOTES.items()]
    formats.append("| (generation) | `date`, `time`, `date-time` are generated without leap seconds "
                   "and year 0000, which common validators refuse though the RFC allows them |")
    return "\n".join(rows) + "\n\n" + "\n".join(formats) + "\n"
