"""A dict that keeps its ``maxsize`` most recently used entries (the one LRU of the engine).

A long-lived process compiling thousands of schemas (a server, a benchmark worker) would
otherwise keep every grammar and mask alive, and each full collection of the cyclic collector
would walk them all (seconds per collection, measured over MaskBench).

Thread-safe: matchers of one vocabulary in several threads share its caches, and a lookup is
two steps (find, then mark as recent) that another thread's eviction could split, so both
lookups and stores run under the cache's lock.

Example
-------
>>> cache = LRUCache(2)
>>> cache["a"], cache["b"] = 1, 2
>>> cache.get("a"); cache["c"] = 3      # "b" is now the least recently used
1
>>> sorted(cache)
['a', 'c']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["LRUCache"]


class LRUCache(OrderedDict):
    """A dict that forgets its least recently used entries beyond ``maxsize``."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize
        self._lock = threading.RLock()

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            if key in self:
                self.move_to_end(key)
                return self[key]
            return default

    def __setitem__(self, key: Any, value: Any) -> None:
        with self._lock:
            super().__setitem__(key, value)
            self.move_to_end(key)
            while len(self) > self.maxsize:
                self.popitem(last=False)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """The value at ``key`` (now the most recent), storing ``default`` there first when there
        is none: of two threads that computed a value, both go on with the one stored first."""
        with self._lock:
            got = self.get(key, self)
            if got is self:
                self[key] = got = default
            return got

    def __reduce__(self) -> Any:  # a lock cannot be pickled; a copy gets its own
        return (type(self), (self.maxsize,), None, None, iter(self.items()))
