"""``oneOf``: an ``anyOf`` when its branches are provably disjoint, else each branch and the
``not`` of those it may overlap (where that negation is exact), else refused.

Why apart: disjointness (:meth:`OneOfExpansion.disjoint`, by type, ``enum``/``const`` values,
numeric or length ranges, or a discriminating required property) reads merged facts, and the
exclusive rewrite needs negation; the merger (:class:`~structgen.frontends.json_schema.dnf.Merger`)
mixes this in and supplies ``dnf``, ``negate``, ``product``, ``either``, ``possible`` and
``merge_term``.

Example
-------
>>> from structgen.frontends.json_schema.keywords import merge
>>> [m.schema() for m in merge([{"oneOf": [{"type": "string"}, {"type": "integer"}]}])]  # disjoint by type
[{'type': 'string'}, {'type': 'integer'}]
>>> [m.schema() for m in merge([{"oneOf": [{"type": "string"}, {"minimum": 3}]}])]  # a string meets both
[{'type': ['null', 'boolean', 'object', 'array', 'number'], 'minimum': 3}]
"""

from __future__ import annotations

from typing import Callable

from structgen.errors import SchemaError, UnsupportedFeatureError, first_error, is_no_value, no_value
from structgen.frontends.json_schema.facts import Merged, ValueChecks, raise_refusal
from structgen.frontends.json_schema.terms import Part, PendingOneOf, Term
from structgen.frontends.json_schema.values import join_pointer, json_equal, kind

__all__ = ["OneOfExpansion", "MAX_ALTERNATIVES", "MAX_DISJOINT_DEPTH"]

#: A conjunction distributes over at most this many alternatives (anyOf/oneOf beside other
#: keywords multiply out); beyond, the combinator is refused.
MAX_ALTERNATIVES = 128
#: How deep :meth:`OneOfExpansion.disjoint` looks into required properties for a discriminator.
MAX_DISJOINT_DEPTH = 3


class OneOfExpansion:
    """The ``oneOf`` half of the merger (see the module docstring): the class mixing it in
    provides ``dnf``, ``negate``, ``product``, ``either``, ``possible``, ``merge_term``,
    ``settled``, ``is_empty``, ``alternatives``, ``refuse`` and ``checks``."""

    refuse: Callable[[str, str, str], None]
    checks: ValueChecks

    def resolve(self, term: Term) -> list[Merged]:
        """Merge a term, expanding its first pending ``oneOf`` (if its branches are disjoint)."""
        at = next((i for i, a in enumerate(term) if isinstance(a, PendingOneOf)), None)
        if at is None:
            return [self.merge_term(term)]
        one: PendingOneOf = term[at]
        rest = term[:at] + term[at + 1:]
        ptr = one.part.pointer
        groups: list[tuple[int, list[Merged]]] = []
        errors: list[SchemaError] = []
        for j, sub in enumerate(one.part.schema["oneOf"]):
            found: list[Merged] = []
            try:
                for t in self.dnf(Part(sub, join_pointer(ptr, "oneOf", j)), one.stack):
                    try:
                        found += self.resolve(rest + t)
                    except SchemaError as err:
                        if not is_no_value(err):
                            raise
                        errors.append(err)
            except SchemaError as err:
                if not is_no_value(err):
                    raise
                errors.append(err)
            if found:
                groups.append((j, found))
        if not groups:
            raise first_error(errors)
        errors.clear()  # see first_error
        overlap = next(((j, k) for a, (j, xs) in enumerate(groups) for k, ys in groups[a + 1:]
                        if not all(self.disjoint(x, y) for x in xs for y in ys)), None)
        if overlap is not None:
            exact = self._exclusive(one, rest, groups)
            if not isinstance(exact, UnsupportedFeatureError):
                return exact
            self.refuse("oneOf", join_pointer(ptr, "oneOf"),
                        f"branches {overlap[0]} and {overlap[1]} may both hold for one value; oneOf is exact "
                        "only when its branches are provably disjoint (by type, enum/const values, numeric or "
                        "length ranges, or a required property whose values are disjoint), or when each "
                        f"branch that may overlap another can be negated exactly (here: {exact.hint}, at "
                        f"{exact.pointer or '/'})")
        out = [m for _, ms in groups for m in ms]
        if len(out) > MAX_ALTERNATIVES:
            raise UnsupportedFeatureError("oneOf", pointer=join_pointer(ptr, "oneOf"),
                                          hint=f"distributing it gives {len(out)} alternatives (limit {MAX_ALTERNATIVES})")
        return out

    def _exclusive(self, one: PendingOneOf, rest: Term,
                   groups: list[tuple[int, list[Merged]]]) -> list[Merged] | UnsupportedFeatureError:
        """``oneOf`` as "branch j and not the others it may overlap", for every j; or the refusal
        of a negation it needs that is not exact."""
        ptr = one.part.pointer
        branches = {j: Part(one.part.schema["oneOf"][j], join_pointer(ptr, "oneOf", j)) for j, _ in groups}
        merged = dict(groups)

        def only(j: int) -> list[Merged]:  # branch j and none of those it may overlap
            terms = self.dnf(branches[j], one.stack)
            for k in branches:
                if k != j and not all(self.disjoint(x, y) for x in merged[j] for y in merged[k]):
                    # Terms with no value are dropped as they appear, so a negation whose other
                    # alternatives contradict branch j does not multiply the count.
                    terms = [t for t in self.product(terms, self.negate(branches[k], one.stack), "oneOf",
                                                      join_pointer(ptr, "oneOf"), limit=MAX_ALTERNATIVES ** 2)
                             if self.possible(rest + t)]
                    if not terms:
                        raise no_value(SchemaError(f"oneOf branch {j} holds only where another does",
                                                   pointer=join_pointer(ptr, "oneOf", j)))
                    if len(terms) > MAX_ALTERNATIVES:
                        raise UnsupportedFeatureError("oneOf", pointer=join_pointer(ptr, "oneOf"),
                                                      hint=f"excluding the other branches gives {len(terms)} "
                                                           f"alternatives (limit {MAX_ALTERNATIVES})")
            return self.either([lambda t=t: self.resolve(rest + t) for t in terms])

        nothing = no_value(SchemaError("no value satisfies exactly one oneOf branch", pointer=join_pointer(ptr, "oneOf")))
        refuse, self.refuse = self.refuse, raise_refusal  # a negation that is not exact: give up
        try:
            # a branch left empty (it lies inside another) is dropped, the others still count
            out = self.either([lambda j=j: only(j) for j in branches], nothing=nothing)
        except SchemaError as err:
            if not is_no_value(err):
                if isinstance(err, UnsupportedFeatureError):
                    return err
                raise
            raise nothing from err
        finally:
            self.refuse = refuse
        if len(out) > MAX_ALTERNATIVES:
            raise UnsupportedFeatureError("oneOf", pointer=join_pointer(ptr, "oneOf"),
                                          hint=f"distributing it gives {len(out)} alternatives (limit {MAX_ALTERNATIVES})")
        return out

    # -- merging one conjunction

    def disjoint(self, a: Merged, b: Merged, depth: int = 0) -> bool:
        """Whether no value satisfies both (``False``: they may overlap, or it cannot tell)."""
        common = a.value_kinds() & b.value_kinds()
        if not common:
            return True
        if a.enum is not None and b.enum is not None:
            return not any(json_equal(x, y) for x in a.enum for y in b.enum)
        for x, y in ((a, b), (b, a)):
            if x.enum is not None:
                return not any(kind(v) in y.kinds and not any(json_equal(v, e) for e, _ in y.excluded)
                               and self.checks.valid_under(v, y.parts) for v in x.enum)
        if common <= {"integer", "fraction"} and a.bounds.meet(b.bounds).is_empty():
            return True
        if common == {"string"} and (
                (a.max_length is not None and a.max_length < b.min_length)
                or (b.max_length is not None and b.max_length < a.min_length)):
            return True
        if common == {"object"} and depth < MAX_DISJOINT_DEPTH:
            for key in dict.fromkeys(a.required + b.required):
                va, vb = a.value_at(key), b.value_at(key)
                if (key in a.required and self.is_empty(vb)) or (key in b.required and self.is_empty(va)):
                    return True  # required on one side, forbidden on the other
                if key in a.required and key in b.required and self.settled(va) and self.settled(vb):
                    xs, ys = self.alternatives(va), self.alternatives(vb)
                    if all(self.disjoint(x, y, depth + 1) for x in xs for y in ys):
                        return True  # a discriminator
        return False

