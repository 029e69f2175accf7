"""Rendered search answers, kept per store version.

A search's answer is a function of the store's state and the request: the resources current at
the index's sequence number, the query, the base URL its links and `fullUrl`s are written with,
and `Prefer: handling`. Agents repeat searches (a rollout re-reads its patient's conditions after
each step), and a harness runs many rollouts over one dataset; under the agent-path load of issue
9 a search and its JSON were about a third of a warm request's server time. So each worker keeps
the rendered bytes of recent search answers, keyed by the store index's identity and sequence
number (`StoreIndex.generation`, `StoreIndex.seq`) plus the request. A write moves the sequence,
so an answer is never served for a state it was not computed on; entries of superseded states
are simply never asked for again and age out (least recently used first, within a byte budget).

Like HAPI FHIR's search cache, but exact: HAPI reuses an identical search's results for a
configurable window (60 s by default) whatever was written meanwhile; here a write invalidates at
once, so the cache changes no answer, only how fast it comes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["MAX_ANSWER_BYTES", "SearchAnswers"]

MAX_ANSWER_BYTES = 256 * 1024
"""A larger answer (a page of hundreds of resources) is rendered each time: caching it would
crowd out the many small answers agents repeat."""


class SearchAnswers:
    """A bounded, thread-safe LRU of rendered answers; `max_bytes` counts the bodies held."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024):
        self.max_bytes = max_bytes
        self.held = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, content: bytes) -> None:
        if len(content) > MAX_ANSWER_BYTES:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self.held -= len(previous)
            self._entries[key] = content
            self.held += len(content)
            while self.held > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.held -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.held = 0
