"""JSON values as a schema reads them: kinds, equality, pointers, and keyword values vetted.

Why a module of its own: equality (``1 == 1.0`` but ``true != 1``), the kind of a value
(integers apart from other numbers) and the JSON pointer of a keyword are needed by merging,
negation, ``oneOf`` disjointness and lowering alike; each keyword value is read (and refused
with a :class:`~structgen.errors.SchemaError` naming its pointer when malformed) in one place.

Example
-------
>>> json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]}), json_equal(True, 1)
(True, False)
>>> kind(3.0), kind(3.5), join_pointer("/properties", "a/b", 0)
('integer', 'fraction', '/properties/a~1b/0')
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from structgen.errors import SchemaError

__all__ = ["KINDS", "TYPES", "TYPE_KINDS", "json_equal", "json_key", "kind", "kinds_of", "join_pointer",
           "holds_array", "is_multiple", "lcm", "schema_list", "enum_values", "non_negative_int",
           "contains_counts", "tighter"]

#: Value kinds: the JSON types, with numbers split into integers and non-integers.
KINDS = frozenset({"null", "boolean", "object", "array", "integer", "fraction", "string"})
#: The ``type`` names, in the order a schema without ``type`` offers them.
TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
#: The kinds each ``type`` name allows.
TYPE_KINDS = {"null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
              "number": {"integer", "fraction"}, "integer": {"integer"}, "string": {"string"}}


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1 == 1.0`` but ``True != 1``, recursively."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal exactly when :func:`json_equal` says so."""
    if isinstance(value, bool) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", Fraction(value) if math.isfinite(value) else value)
    if isinstance(value, list):
        return ("array", tuple(json_key(x) for x in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, json_key(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def kind(value: Any) -> str:
    """The kind of a JSON value (:data:`KINDS`): ``integer`` for any number with no fraction."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if isinstance(value, int) or value.is_integer() else "fraction"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def kinds_of(value: Any, pointer: str) -> frozenset[str]:
    """The kinds a ``type`` keyword's value allows (one name or a list)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(t not in TYPE_KINDS for t in names):
        raise SchemaError(f"invalid type {value!r}", pointer=pointer)
    return frozenset(k for t in names for k in TYPE_KINDS[t])


def join_pointer(ptr: str, *parts: Any) -> str:
    """``ptr`` extended by reference tokens (``~`` and ``/`` escaped)."""
    for p in parts:
        ptr += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return ptr


def holds_array(value: Any) -> bool:
    """Whether a JSON value is or contains an array."""
    if isinstance(value, list):
        return True
    return isinstance(value, dict) and any(holds_array(v) for v in value.values())


def is_multiple(value: Any, divisor: Fraction) -> bool:
    """Whether ``value`` is a number that is a multiple of ``divisor`` (decimals exactly)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    exact = Fraction(value) if isinstance(value, int) else Fraction(repr(value))
    return (exact / divisor).denominator == 1


def lcm(a: Fraction, b: Fraction) -> Fraction:
    """The least positive common multiple of two positive rationals."""
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


# -- keyword values, vetted


def schema_list(schema: dict, kw: str, ptr: str) -> list[Any]:
    """The subschemas of ``allOf``/``anyOf``/``oneOf``: a non-empty array."""
    value = schema[kw]
    if not isinstance(value, list) or not value:
        raise SchemaError(f"{kw} must be a non-empty array", pointer=join_pointer(ptr, kw))
    return value


def enum_values(schema: dict, kw: str, ptr: str) -> list[Any]:
    """The values ``enum`` (a non-empty array) or ``const`` allows."""
    if kw == "const":
        return [schema["const"]]
    values = schema["enum"]
    if not isinstance(values, list) or not values:
        raise SchemaError("enum must be a non-empty array", pointer=join_pointer(ptr, "enum"))
    return values


def non_negative_int(schema: dict, kw: str, ptr: str) -> int:
    """A count keyword's value (``2.0`` reads as ``2``)."""
    v = schema[kw]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"{kw} must be a non-negative integer, not {v!r}", pointer=join_pointer(ptr, kw))
    return v


def contains_counts(schema: dict, ptr: str) -> tuple[int, int | None]:
    """``(minContains, maxContains)`` beside a ``contains``: at least one item by default."""
    lo = non_negative_int(schema, "minContains", ptr) if "minContains" in schema else 1
    hi = non_negative_int(schema, "maxContains", ptr) if "maxContains" in schema else None
    return lo, hi


def tighter(new: Any, old: Any, *, lower: bool, new_open: bool = False, old_open: bool = False) -> bool:
    """Whether the bound ``new`` is tighter than ``old`` (``None``: no bound yet), for a lower
    or an upper bound; at equal values an open (exclusive) bound is the tighter, otherwise the
    first one stays (so does its pointer). The one rule for counts, lengths and numeric bounds."""
    if old is None:
        return True
    if new == old:
        return new_open and not old_open
    return new > old if lower else new < old
