"""Combinators brought down to plain schemas: a conjunction of subschemas in disjunctive normal form.

A schema object is the conjunction of its keywords: ``$ref`` and ``allOf`` add conjuncts (the
2019-09+ reading of ``$ref``: one more assertion; a document declaring drafts 3 to 7, which
ignore keywords beside ``$ref``, is read so unless ``strict``), ``anyOf`` adds a disjunction,
``if``/``then``/``else`` and the dependency keywords a disjunction with a negation, ``not`` a
negation (:mod:`~structgen.frontends.json_schema.negation`), ``oneOf`` a pending choice
(:mod:`~structgen.frontends.json_schema.oneof`). :meth:`Merger.alternatives` gives a list of
:class:`~structgen.frontends.json_schema.facts.Merged`, each one term merged exactly; their
union is the conjunction. Which keyword does what is read from the registry handed in
(:mod:`~structgen.frontends.json_schema.keywords`).

Subschemas under a key or in ``items`` stay unmerged (:class:`~structgen.frontends.json_schema.terms.Conj`)
until that place is compiled, so recursion through ``properties`` and ``items`` needs no depth
limit; a reference cycle that never enters one (``{"$defs": {"a": {"allOf": [{"$ref":
"#/$defs/a"}]}}}``) is left recursion, a :class:`~structgen.errors.CompileError`.

A conjunction no value satisfies (``false``, ``string`` ∩ ``integer``, ``not: {}``) raises an
error marked by :func:`~structgen.errors.no_value`: an ``anyOf`` branch or an alternative that
is empty is dropped, an optional property that can have no value is a forbidden key.

Example
-------
>>> from structgen.frontends.json_schema.keywords import merge
>>> [m.schema() for m in merge([{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
...                             {"properties": {"a": {"minimum": 0}}, "additionalProperties": False}])]
[{'properties': {'a': {'allOf': [{'type': 'integer'}, {'minimum': 0}]}}, 'required': ['a'], 'additionalProperties': False}]
"""

from __future__ import annotations

from typing import Any, Callable

from structgen.errors import CompileError, SchemaError, UnsupportedFeatureError, first_error, is_no_value, no_value
from structgen.frontends.json_schema.facts import Gathering, Merged, ValueChecks, raise_refusal
from structgen.frontends.json_schema.oneof import MAX_ALTERNATIVES, OneOfExpansion
from structgen.frontends.json_schema.refs import resolve_ref
from structgen.frontends.json_schema.registry import Registry
from structgen.frontends.json_schema.terms import Absent, Conj, Part, PendingOneOf, Term
from structgen.frontends.json_schema.values import join_pointer, schema_list

__all__ = ["Merger", "MAX_ALTERNATIVES", "MAX_PRUNED_PRODUCT"]

#: Past MAX_ALTERNATIVES, products up to this size are pruned of terms with no value before
#: the limit applies (each term costs one merge).
MAX_PRUNED_PRODUCT = 4096


class Merger(OneOfExpansion):
    """Disjunctive normal forms of conjunctions of subschemas of one document (memoized).

    ``keywords``: the registry (what each keyword merges, expands and negates to).
    ``check(schema, pointer)`` vets each subschema reached (the frontend refuses keywords it
    does not support there); ``refuse(keyword, pointer, hint)`` raises, or under ``lenient``
    records and returns (then ``oneOf`` reads as ``anyOf``, an inexact ``not`` is dropped).
    ``enum`` values are checked against each subschema with python-jsonschema.
    """

    def __init__(self, root: Any, keywords: Registry, *, check: Callable[[dict, str], None] | None = None,
                 refuse: Callable[[str, str, str], None] | None = None,
                 ref_siblings_always: bool = False) -> None:
        self.root = root
        self.keywords = keywords
        # Drafts 3 to 7 ignore keywords beside $ref; later drafts apply them. Applying them in
        # every draft (ref_siblings_always, generation's strict mode) keeps to what the author
        # most likely meant, and what it generates still validates under the declared draft.
        dialect = root.get("$schema") if isinstance(root, dict) else None
        old_ref = isinstance(dialect, str) and any(f"/draft-0{d}/" in dialect for d in "34567")
        self.ref_alone = old_ref and not ref_siblings_always
        self.old_draft = old_ref
        self.check = check or (lambda schema, pointer: None)
        self.refuse = refuse or raise_refusal
        self.checks = ValueChecks(root, keywords.local, keywords.checked_with)
        self._memo: dict[tuple[str, ...], list[Merged]] = {}
        self._computing: set[tuple[str, ...]] = set()  # alternatives() under way
        # possible() per term: oneOf exclusions and negations ask of the same few terms again
        # and again (Github_medium o58661: 138k checks of 1.7k distinct terms)
        # An answer that met a conjunction still being worked out (is_empty says "not empty"
        # for now) holds while that conjunction is: kept with the keys of those it met.
        self._possible: dict[tuple, tuple[bool, frozenset[tuple[str, ...]]]] = {}
        self._unsettled: set[tuple[str, ...]] = set()  # met by the check under way

    # -- entry points

    def alternatives(self, conj: Conj) -> list[Merged]:
        """The merged alternatives whose union is the conjunction of ``conj``'s parts.

        Raises an error marked :func:`~structgen.errors.no_value` when no value satisfies it.
        """
        key = conj.key
        if key not in self._memo:
            self._computing.add(key)
            try:
                terms: list[Term] = [()]
                for part in conj.parts:
                    terms = self.product(terms, self.dnf(part, ()), "allOf", part.pointer)
                self._memo[key] = self.either([lambda t=t: self.resolve(t) for t in terms])
            finally:
                self._computing.discard(key)
        return self._memo[key]

    def settled(self, conj: Conj) -> bool:
        """False while ``conj``'s alternatives are being worked out further up the call stack (a
        recursive schema met inside itself): checks that would need them cannot tell yet."""
        return conj.key not in self._computing

    def is_empty(self, conj: Conj) -> bool:
        """Whether no value satisfies ``conj`` (as far as merging can tell; a recursive schema
        met again inside its own check counts as not empty)."""
        if not self.settled(conj):
            self._unsettled.add(conj.key)  # an answer for now: possible()'s memo notes it
            return False
        try:
            self.alternatives(conj)
        except SchemaError as err:
            if not is_no_value(err):
                raise
            return True
        return False

    # -- disjunctive normal form

    def dnf(self, part: Part, stack: tuple[str, ...]) -> list[Term]:
        """The terms of one subschema: the ``$ref`` target first (its keys come before those
        beside it), the subschema itself, then each applicator's expansion in registry order."""
        schema, ptr = part.schema, part.pointer
        if schema is True:
            return [()]
        if schema is False:
            raise no_value(UnsupportedFeatureError("false", pointer=ptr,
                                                   hint="a false schema matches nothing, so no value can be generated"))
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer=ptr)
        stack = enter(stack, ptr)
        self.check(schema, ptr)
        terms: list[Term] = [()]
        if "$ref" in schema:
            terms = self.dnf(resolve_ref(self.root, schema["$ref"], ptr), stack)
            if self.ref_alone:
                return terms
        terms = [t + (part,) for t in terms]
        for kw, expand in self.keywords.expansions:
            if kw in schema:
                terms = expand(self, part, kw, terms, stack)
        return terms

    def expand_all_of(self, part: Part, kw: str, terms: list[Term], stack: tuple[str, ...]) -> list[Term]:
        """``allOf``: each branch's terms and'ed in."""
        ptr = part.pointer
        for i, sub in enumerate(schema_list(part.schema, kw, ptr)):
            terms = self.product(terms, self.dnf(Part(sub, join_pointer(ptr, kw, i)), stack), kw, join_pointer(ptr, kw))
        return terms

    def expand_any_of(self, part: Part, kw: str, terms: list[Term], stack: tuple[str, ...]) -> list[Term]:
        """``anyOf``: the union of the branches (those with no value left out), and'ed in."""
        ptr = part.pointer
        branches = self.either([lambda i=i, sub=sub: self.dnf(Part(sub, join_pointer(ptr, kw, i)), stack)
                                for i, sub in enumerate(schema_list(part.schema, kw, ptr))])
        return self.product(terms, branches, kw, join_pointer(ptr, kw))

    def expand_one_of(self, part: Part, kw: str, terms: list[Term], stack: tuple[str, ...]) -> list[Term]:
        """``oneOf``: pending, expanded when the term is resolved (:meth:`resolve`)."""
        schema_list(part.schema, kw, part.pointer)
        return [t + (PendingOneOf(part, stack),) for t in terms]

    def expand_if(self, part: Part, kw: str, terms: list[Term], stack: tuple[str, ...]) -> list[Term]:
        """``if``/``then``/``else`` as ``(if and then) or (not if and else)``; the negation must be exact."""
        schema, ptr = part.schema, part.pointer
        if "then" not in schema and "else" not in schema:
            return terms
        cond = Part(schema["if"], join_pointer(ptr, "if"))
        then = Part(schema.get("then", True), join_pointer(ptr, "then"))
        other = Part(schema.get("else", True), join_pointer(ptr, "else"))
        both = self.either([
            lambda: self.product(self.dnf(cond, stack), self.dnf(then, stack), "then", then.pointer),
            lambda: self.product(self.negate(cond, stack, keyword="if"), self.dnf(other, stack),
                                 "else", other.pointer),
        ])
        return self.product(terms, both, "if", join_pointer(ptr, "if"))

    def expand_dependencies(self, part: Part, kw: str, terms: list[Term], stack: tuple[str, ...]) -> list[Term]:
        """Per key of ``dependentRequired``/``dependentSchemas``/``dependencies``: the key absent,
        or present with the keys it requires or the schema it brings (a disjunction)."""
        table, ptr = part.schema[kw], part.pointer
        if not isinstance(table, dict):
            raise SchemaError(f"{kw} must be an object", pointer=join_pointer(ptr, kw))
        for key, need in table.items():
            where = join_pointer(ptr, kw, key)
            absent = (Absent(key, where),)
            if isinstance(need, list):  # required keys (dependentRequired, or dependencies' array form)
                if kw == "dependentSchemas" or not all(isinstance(k, str) for k in need):
                    raise SchemaError(f"{kw} values must be {'schemas' if kw == 'dependentSchemas' else 'arrays of strings'}",
                                      pointer=where)
                present = Part({"type": "object", "required": [key, *need]}, where, True)
                branches = [absent, (present,)]
            else:
                if kw == "dependentRequired":
                    raise SchemaError("dependentRequired values must be arrays of strings", pointer=where)
                present = Part({"type": "object", "required": [key]}, where + "~present", True)
                branches = self.either([
                    lambda absent=absent: [absent],
                    lambda need=need, where=where, present=present: [
                        (present,) + t for t in self.dnf(Part(need, where), stack)]])
            terms = self.product(terms, branches, kw, where)
        return terms

    def expand_not(self, part: Part, kw: str, terms: list[Term], stack: tuple[str, ...]) -> list[Term]:
        """``not``: the negation's terms and'ed in."""
        where = join_pointer(part.pointer, kw)
        return self.product(terms, self.negate(Part(part.schema[kw], where), stack), kw, where)

    # -- negation

    def negate(self, part: Part, stack: tuple[str, ...], keyword: str = "not") -> list[Term]:
        """The disjunctive normal form of ``not`` ``part``: the union of its keywords'
        negations (De Morgan), each from the keyword's registry entry."""
        schema, ptr = part.schema, part.pointer
        everything = no_value(UnsupportedFeatureError(
            "not", pointer=ptr, hint="`not` of a schema that every value satisfies matches nothing"))
        if schema is False:
            return [()]
        if schema is True:
            raise everything
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer=ptr)
        stack = enter(stack, ptr)
        self.check(schema, ptr)
        if "$ref" in schema and self.ref_alone:
            return self.negate(resolve_ref(self.root, schema["$ref"], ptr), stack, keyword)
        keys = [k for k in schema if k in self.keywords.supported]
        inexact = [k for k in keys if k not in self.keywords.negatable]
        pieces: list[Callable[[], list[Term]]] = []
        for kw in keys:
            if kw not in inexact:
                found = self.keywords[kw].negate(self, schema, ptr, kw, stack, keyword)
                if found is None:
                    inexact.append(kw)
                else:
                    pieces += found
        if inexact:
            self.refuse(keyword, ptr, f"`not` is exact over type, enum, const, required, properties, "
                                      f"additionalProperties, patternProperties, propertyNames, multipleOf, "
                                      f"contains, dependencies, items (one schema), numeric bounds, lengths "
                                      f"and item counts (and not, anyOf, allOf, oneOf, $ref of those); not "
                                      f"over {', '.join(k for k in keys if k in inexact)}")
            return [()]  # lenient: the negation is dropped
        if not keys:
            raise everything
        out = self.either(pieces, nothing=everything)
        if len(out) > MAX_ALTERNATIVES:
            raise UnsupportedFeatureError("not", pointer=ptr, hint=f"the negation has {len(out)} alternatives "
                                                                    f"(limit {MAX_ALTERNATIVES})")
        return out

    # -- products and unions of terms

    def either(self, options: list[Callable[[], list]], nothing: SchemaError | None = None) -> list:
        """The union of what the options give (terms, merged alternatives), leaving out those no
        value satisfies; when none is left, the first such error (or ``nothing``)."""
        out: list = []
        errors: list[SchemaError] = []
        for option in options:
            try:
                out += option()
            except SchemaError as err:
                if not is_no_value(err):
                    raise
                errors.append(err)
        if not out:
            if errors:
                raise first_error(errors)
            raise nothing or no_value(SchemaError("no value satisfies this schema"))
        errors.clear()  # see first_error
        return out

    def possible(self, term: Term) -> bool:
        """False when ``term`` surely has no value: its merge fails, or a key it requires can
        hold no value (a cheap check; pending ``oneOf`` and deeper conflicts count as possible)."""
        if any(isinstance(a, PendingOneOf) for a in term):
            return True
        # a part's pointer names one subschema (as in Conj.key); refusals raise inside a oneOf
        # exclusion, and a refused merge counts as possible, so whether they do is in the key
        key = (self.refuse is raise_refusal, *[a.pointer if isinstance(a, Part) else a for a in term])
        try:
            got = self._possible.get(key)
        except TypeError:  # an atom that is no key (a list in `not: {enum: ...}`): unmemoized
            return self._possible_now(term)
        if got is not None and got[1] <= self._computing:
            self._unsettled |= got[1]
            return got[0]
        outer, self._unsettled = self._unsettled, set()
        try:
            yes = self._possible_now(term)
            # "no" is final; a "yes" that met conjunctions being worked out holds while they are
            self._possible[key] = (yes, frozenset(self._unsettled) if yes else frozenset())
        finally:
            outer |= self._unsettled
            self._unsettled = outer
        return yes

    def _possible_now(self, term: Term) -> bool:
        try:
            m = self.merge_term(term)
            return not any(self.is_empty(m.value_at(key)) for key in m.required)
        except SchemaError as err:
            if is_no_value(err):
                return False
            return True  # not for this check to report: the full rewrite meets it again

    def product(self, terms: list[Term], factor: list[Term], keyword: str, pointer: str,
                limit: int = MAX_ALTERNATIVES) -> list[Term]:
        """Every term of ``terms`` and'ed with every term of ``factor``. Past ``limit``, the terms
        that surely have no value (types apart, say) are dropped first: an ``allOf`` of
        ``anyOf``s multiplies out to many terms of which few are possible."""
        size = len(terms) * len(factor)
        if size <= limit:
            return [a + b for a in terms for b in factor]
        if size <= MAX_PRUNED_PRODUCT:
            out = [a + b for a in terms for b in factor if self.possible(a + b)]
            if not out:
                raise no_value(SchemaError(f"no value satisfies {keyword} and the keywords beside it",
                                           pointer=pointer))
            if len(out) <= limit:
                return out
            size = len(out)
        raise UnsupportedFeatureError(keyword, pointer=pointer,
                                      hint=f"distributing it over the other keywords gives "
                                           f"{size} alternatives (limit {limit})")

    # -- merging one term

    def merge_term(self, term: Term) -> Merged:
        """One term's subschemas merged keyword by keyword (each keyword's registry ``merge``)."""
        parts = tuple({a.pointer: a for a in term if isinstance(a, Part)}.values())
        g = Gathering(Merged(parts), refuse=self.refuse, old_draft=self.old_draft)
        for part in parts:
            if isinstance(part.schema, dict):  # else True
                for kw, merge in self.keywords.merges_for(part.schema):
                    merge(g, part, kw)
        return g.finish(term, self.checks, self.refuse)


def enter(stack: tuple[str, ...], ptr: str) -> tuple[str, ...]:
    """``stack`` with ``ptr`` pushed; a pointer already on it is left recursion."""
    if ptr in stack:
        cycle = " -> ".join(stack[stack.index(ptr):] + (ptr,))
        raise CompileError(f"left recursion: the subschema at '{ptr or '/'}' applies itself through {cycle} "
                           "before any property or item")
    return stack + (ptr,)
