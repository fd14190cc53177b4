"""A small thread-safe LRU cache whose entries can also expire after a fixed time."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most `size` entries, the least recently used dropped first; with `ttl_s`, entries expire.

    `ttl_s=None` keeps entries until they are pushed out; `ttl_s=0` disables the cache (every
    `get` misses), which is how a deployment turns off a cache whose staleness it cannot accept.
    Values are shared between callers: treat them as read-only.
    """

    def __init__(self, size: int, ttl_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1:
            raise ValueError("an LRU cache needs room for at least one entry")
        self.size = size
        self.ttl_s = ttl_s
        self.clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The cached value, or None when absent or expired."""
        if self.ttl_s == 0:
            return None
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            stored_at, value = found
            if self.ttl_s is not None and self.clock() - stored_at >= self.ttl_s:
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        """Store (or replace) a value; returns it."""
        if self.ttl_s == 0:
            return value
        with self._lock:
            self._items[key] = (self.clock(), value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
