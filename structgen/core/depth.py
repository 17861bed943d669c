"""Room for deep inputs: the Python recursion limit a compile runs under, and nesting limits.

Compiling walks nested inputs (a schema's subschemas, a grammar's parentheses) recursively, a
few to a few dozen Python frames per level. Python's default limit of 1,000 frames stops that
at 40-200 levels, well inside what real inputs use; :func:`recursion_room` raises the limit to
:data:`COMPILE_RECURSION_LIMIT` for the duration of a compile, and the frontends refuse inputs
nested deeper than their documented limits (:data:`MAX_NESTING`: JSON containers of a schema,
parentheses of a grammar) with an error naming where, so that the raised limit is never reached
by a legitimate input. Where depth is not bounded by the input's own nesting (long chains of
``$ref`` or of grammar rules, long number literals, many properties), the code iterates instead.

On CPython 3.11+ a call from Python to Python uses no C stack, so the raised limit is safe for
the walkers; the data the walkers recurse over is bounded by :data:`MAX_NESTING`.

Example
-------
>>> import sys
>>> before = sys.getrecursionlimit()
>>> with recursion_room():
...     sys.getrecursionlimit() >= COMPILE_RECURSION_LIMIT
True
>>> sys.getrecursionlimit() == before
True
"""

from __future__ import annotations

import sys
import threading

__all__ = ["COMPILE_RECURSION_LIMIT", "MAX_NESTING", "recursion_room", "too_deep"]

#: The Python recursion limit while compiling (frames; the default is 1,000).
COMPILE_RECURSION_LIMIT = 60_000
#: The deepest nesting a frontend accepts: JSON containers (objects and arrays) inside a schema,
#: parentheses inside a grammar rule. 2,000 containers is 1,000 levels of ``properties``.
MAX_NESTING = 2_000

_lock = threading.Lock()
_users = 0
_saved = 0


class recursion_room:  # noqa: N801 -- used as a function: ``with recursion_room():``
    """Run the body with the recursion limit at least :data:`COMPILE_RECURSION_LIMIT`.

    The limit is process-wide: it is raised when the first compile (of any thread) enters and
    put back when the last one leaves. A class, not a generator context manager: the stack
    machine enters it once per cold closure, tens of thousands of times in a cold walk, and
    the generator's set-up was most of its cost.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        global _users, _saved
        with _lock:
            if _users == 0:
                _saved = sys.getrecursionlimit()
                if _saved < COMPILE_RECURSION_LIMIT:
                    sys.setrecursionlimit(COMPILE_RECURSION_LIMIT)
            _users += 1

    def __exit__(self, *exc: object) -> None:
        global _users
        with _lock:
            _users -= 1
            if _users == 0 and sys.getrecursionlimit() == max(_saved, COMPILE_RECURSION_LIMIT):
                sys.setrecursionlimit(_saved)


def too_deep(value: object, limit: int = MAX_NESTING) -> str | None:
    """The JSON pointer of the first container in ``value`` (dicts, lists, tuples) nested more
    than ``limit`` containers deep, or None. Iterative; a container met twice on one path (a
    cycle) is not followed again.

    >>> too_deep({"a": [[1]]}, limit=2)
    '/a/0'
    >>> too_deep({"a": [1]}, limit=2) is None
    True
    """
    todo: list[tuple[object, int, tuple]] = [(value, 1, ())]  # path: (key, parent's path) links
    seen: set[int] = set()
    while todo:
        node, depth, path = todo.pop()
        if not isinstance(node, (dict, list, tuple)) or id(node) in seen:
            continue
        if depth > limit:
            keys = []
            while path:
                keys.append(path[0])
                path = path[1]
            return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in reversed(keys))
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        todo.extend((v, depth + 1, (k, path)) for k, v in items)
    return None
