"""A bounded LRU of encoded results, with strong ETags.

Every result the service computes is a deterministic function of its normalised inputs,
so the encoded response body is cached under a canonical encoding of those inputs.  The
ETag is a hash of the body itself, so it stays valid across evictions and restarts: a
recomputed body is byte-for-byte the same and carries the same tag.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["CachedBody", "QueryIndex", "ResultCache", "cache_key", "etag_matches"]


@dataclass(frozen=True)
class CachedBody:
    """An encoded JSON response body and its strong ETag (quoted, as sent)."""

    body: bytes
    etag: str


def cache_key(kind: str, inputs: Any) -> str:
    """A canonical key: a 256-bit BLAKE2b digest of the kind and the inputs as sorted,
    compact JSON.

    The digest, not the text, is kept: a request can be a megabyte, and the cache's byte
    budget counts bodies, so text keys would hold memory outside it.  At 256 bits a
    collision (two requests sharing an answer) is not a practical concern.

    Examples
    --------
    >>> cache_key("nic", {"b": 1, "a": [1.0, 2]}) == cache_key("nic", {"a": [1.0, 2], "b": 1})
    True
    >>> len(cache_key("nic", {"rates": list(range(100_000))}))
    68
    """
    digest = hashlib.blake2b(kind.encode(), digest_size=32)
    digest.update(b"\0")
    digest.update(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode())
    return kind + ":" + digest.hexdigest()


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header value matches ``etag`` (weak comparison).

    Examples
    --------
    >>> etag_matches('W/"abc", "def"', '"abc"'), etag_matches("*", '"x"'), etag_matches(None, '"x"')
    (True, True, False)
    """
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        tag = candidate.strip()
        if tag == "*":
            return True
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == etag:
            return True
    return False


class ResultCache:
    """Least-recently-used cache bounded by entry count and by total body bytes.

    Parameters
    ----------
    max_entries : int
        Most entries kept; 0 disables caching.
    max_bytes : int
        Most body bytes kept in total; a body larger than a quarter of this is not cached.

    Examples
    --------
    >>> cache = ResultCache(max_entries=2, max_bytes=1_000)
    >>> entry = cache.put("k", b'{"x":1}')
    >>> cache.get("k") == entry, cache.get("missing")
    (True, None)
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedBody] = OrderedDict()
        self._bytes = 0
        # Sync route handlers run in a thread pool: moves and evictions must not interleave.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """Total bytes of the cached bodies."""
        return self._bytes

    def get(self, key: str) -> CachedBody | None:
        """The cached body for ``key`` (marked most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: str, body: bytes) -> CachedBody:
        """Store ``body`` under ``key``; evict the least recently used to stay in bounds."""
        entry = CachedBody(body, '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"')
        if self.max_entries <= 0 or len(body) > self.max_bytes // 4:
            return entry
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old.body)
            self._entries[key] = entry
            self._bytes += len(body)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted.body)
        return entry

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


class QueryIndex:
    """Raw query strings of GET requests already answered -> their keys in the result cache.

    A front index to :class:`ResultCache`: the route validates and normalises a query once,
    then files a digest of its raw bytes here beside the cache key it computed, so that the
    same query again is answered without any parsing.  The index holds no bodies (they stay
    in the cache, under its byte budget, and leave with it) and no query text: each entry
    is two fixed-size digests, about 300 bytes with its bookkeeping, however long the
    query.  Bounded LRU, like the cache.

    Parameters
    ----------
    paths : dict of str to str
        Indexed request paths -> the cache kind reported in metrics.
    max_entries : int
        Most query strings kept; 0 disables the index.
    cache : ResultCache
        The cache whose keys are filed.

    Examples
    --------
    >>> cache = ResultCache(max_entries=8, max_bytes=1_000)
    >>> index = QueryIndex({"/rate": "rate"}, max_entries=8, cache=cache)
    >>> entry = cache.put("rate:1", b'{"x":1}')
    >>> index.put("/rate", b"a=1", "rate:1")
    >>> index.get("/rate", b"a=1") == entry, index.get("/rate", b"a=2")
    (True, None)
    >>> cache.clear()  # evicted from the cache: the index forgets it too
    >>> index.get("/rate", b"a=1"), len(index)
    (None, 0)
    """

    def __init__(self, paths: dict[str, str], max_entries: int, cache: ResultCache) -> None:
        self.paths = paths
        self.max_entries = max_entries
        self.cache = cache
        self._entries: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _digest(path: str, query: bytes) -> bytes:
        digest = hashlib.blake2b(path.encode(), digest_size=16)
        digest.update(b"?")
        digest.update(query)
        return digest.digest()

    def get(self, path: str, query: bytes) -> CachedBody | None:
        """The cached body for this exact path and query string, or None."""
        digest = self._digest(path, query)
        with self._lock:
            key = self._entries.get(digest)
            if key is None:
                return None
            self._entries.move_to_end(digest)
        entry = self.cache.get(key)
        if entry is None:
            with self._lock:
                self._entries.pop(digest, None)
        return entry

    def put(self, path: str, query: bytes, key: str) -> None:
        """File the raw query under the cache key its answer is stored at (only after the
        route answered it)."""
        if self.max_entries <= 0:
            return
        digest = self._digest(path, query)
        with self._lock:
            self._entries[digest] = key
            self._entries.move_to_end(digest)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
