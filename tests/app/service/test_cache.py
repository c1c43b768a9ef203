"""The bounded LRU of encoded results and its ETags."""

from __future__ import annotations

import hashlib
import tracemalloc

from app.service.cache import QueryIndex, ResultCache, cache_key, etag_matches


def test_lru_evicts_the_least_recently_used() -> None:
    cache = ResultCache(max_entries=2, max_bytes=10_000)
    cache.put("a", b"1")
    cache.put("b", b"2")
    assert cache.get("a") is not None  # "a" is now the most recently used
    cache.put("c", b"3")
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    assert len(cache) == 2


def test_total_bytes_stay_bounded() -> None:
    cache = ResultCache(max_entries=1_000, max_bytes=1_000)
    for i in range(100):
        cache.put(str(i), bytes(200))
    assert cache.size_bytes <= 1_000
    assert len(cache) == 5


def test_a_body_over_a_quarter_of_the_budget_is_served_but_not_kept() -> None:
    cache = ResultCache(max_entries=10, max_bytes=1_000)
    entry = cache.put("big", bytes(300))
    assert entry.body == bytes(300)
    assert cache.get("big") is None


def test_etag_is_a_hash_of_the_body() -> None:
    cache = ResultCache(max_entries=10, max_bytes=1_000)
    body = b'{"x":1}'
    entry = cache.put("k", body)
    assert entry.etag == '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
    assert ResultCache(1, 1_000).put("other key", body).etag == entry.etag


def test_key_is_canonical() -> None:
    assert cache_key("k", {"a": 1, "b": [1, 2]}) == cache_key("k", {"b": [1, 2], "a": 1})
    assert cache_key("k", {"a": 1}) != cache_key("j", {"a": 1})


def test_if_none_match_forms() -> None:
    assert etag_matches('"x"', '"x"')
    assert etag_matches('W/"x"', '"x"')
    assert etag_matches('"y", "x"', '"x"')
    assert etag_matches("*", '"x"')
    assert not etag_matches('"y"', '"x"')
    assert not etag_matches("", '"x"')


def test_disabled_cache_keeps_nothing() -> None:
    cache = ResultCache(max_entries=0, max_bytes=1_000)
    cache.put("k", b"1")
    assert cache.get("k") is None


def test_key_size_does_not_grow_with_the_request() -> None:
    # Issue #13: keys were the request text, held outside the cache's byte budget (300
    # distinct 959 KB posts added 276 MB).  A digest is the same size for any request.
    small = cache_key("srn", {"parameters": {"a": 1.0}})
    large = cache_key("srn", {"parameters": {f"p{i}": 1.5 for i in range(100_000)}})
    assert len(large) == len(small) <= 80
    assert large != cache_key("srn", {"parameters": {f"p{i}": 1.5 for i in range(99_999)}})


def test_query_index_memory_does_not_grow_with_the_query() -> None:
    # Issue #13 (item 7), the GET side: the index kept raw query strings (up to 4 KB each)
    # and their bodies, outside the cache's byte budget.  It now keeps two digests per
    # entry; 2,000 queries of 4 KB must cost far less than the queries themselves (8 MB).
    cache = ResultCache(max_entries=10_000, max_bytes=10_000_000)
    index = QueryIndex({"/rate": "rate"}, max_entries=10_000, cache=cache)
    queries = [b"q=%d&pad=" % i + bytes(4_096) for i in range(2_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i, query in enumerate(queries):
            index.put("/rate", query, cache_key("rate", i))
        grown = sum(
            stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename")
        )
    finally:
        tracemalloc.stop()
    assert len(index) == 2_000
    assert grown < 2_000 * 600, grown  # about 300 bytes an entry; the queries are 8 MB


def test_query_index_answers_only_what_the_cache_still_holds() -> None:
    # The index held bodies of its own, which outlived their eviction from the cache.
    cache = ResultCache(max_entries=2, max_bytes=10_000)
    index = QueryIndex({"/rate": "rate"}, max_entries=100, cache=cache)
    for i in range(3):
        cache.put(f"k{i}", b"%d" % i)
        index.put("/rate", b"i=%d" % i, f"k{i}")
    assert index.get("/rate", b"i=0") is None  # evicted from the cache by k2
    assert len(index) == 2
    hit = index.get("/rate", b"i=2")
    assert hit is not None and hit.body == b"2"
    assert index.get("/other", b"i=2") is None  # the path is part of the key
    assert index.get("/rate", b"i=2&") is None


def test_query_index_is_a_bounded_lru() -> None:
    cache = ResultCache(max_entries=100, max_bytes=10_000)
    index = QueryIndex({"/rate": "rate"}, max_entries=2, cache=cache)
    for i in range(3):
        cache.put(f"k{i}", b"x")
    index.put("/rate", b"a", "k0")
    index.put("/rate", b"b", "k1")
    assert index.get("/rate", b"a") is not None  # "a" now the most recently used
    index.put("/rate", b"c", "k2")
    assert index.get("/rate", b"b") is None
    assert index.get("/rate", b"a") is not None and index.get("/rate", b"c") is not None
    disabled = QueryIndex({"/rate": "rate"}, max_entries=0, cache=cache)
    disabled.put("/rate", b"a", "k0")
    assert len(disabled) == 0
