"""A dict that keeps its ``maxsize`` most recently used entries (the one LRU of the engine).

A long-lived process compiling thousands of schemas (a server, a benchmark worker) would
otherwise keep every grammar and mask alive, and each full collection of the cyclic collector
would walk them all (seconds per collection, measured over MaskBench).

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

from collections import OrderedDict
from typing import Any

__all__ = ["LRUCache"]


class LRUCache(OrderedDict):
    """A dict that forgets its least recently used entries beyond ``maxsize``."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)
