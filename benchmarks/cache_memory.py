"""Memory the result cache holds for large requests: are the keys inside the budget?

Run from the repository root::

    .venv/bin/python benchmarks/cache_memory.py              # 300 posts of ~959 KB
    .venv/bin/python benchmarks/cache_memory.py --posts 100

In one process it builds the app (default settings, warm-up off) and posts ``--posts``
distinct ``POST /srn/solve`` bodies of about 959 KB each (a small queue net with a large
``parameters`` table, so the answer is small but the request, which is the cache key, is
big), then prints the resident-set growth of the process, the cache's own count of body
bytes and its entries.  A cache that keys on the request text holds every request in
memory outside its byte budget; one that keys on a digest holds 32 bytes per entry.
In-process ASGI calls: no network at all.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import Settings, create_app  # noqa: E402

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from fastapi.testclient import TestClient


def rss_bytes() -> int:
    """Resident set size of this process (bytes), from /proc."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def big_request(k: int, target_bytes: int) -> dict[str, Any]:
    """An M/M/1/5 net whose parameter table pads the body to about ``target_bytes``."""
    per_entry = len('"p000000_0000":1.5,')
    count = target_bytes // per_entry
    return {
        "net": {
            "places": {"queue": 0},
            "transitions": [
                {
                    "name": "arrive",
                    "rate": "lam",
                    "outputs": {"queue": 1},
                    "inhibitors": {"queue": 5},
                },
                {"name": "serve", "rate": "mu", "inputs": {"queue": 1}},
            ],
            "parameters": {
                "lam": 1.0,
                "mu": 2.0,
                **{f"p{i:06d}_{k:04d}": 1.5 for i in range(count)},
            },
        },
        "analysis": "steady-state",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=300, help="distinct posts (at most 2000)")
    parser.add_argument("--kb", type=int, default=959, help="body size (KB, at most 990)")
    args = parser.parse_args()
    posts = max(1, min(args.posts, 2_000))
    target = 1_000 * max(1, min(args.kb, 990))

    app = create_app(Settings(warm_up=False, log_level="warning", solve_workers=1))
    state = app.state.service
    with TestClient(app) as client:
        # One post first, so the imports and first-call allocations are not counted.
        warm = client.post(
            "/srn/solve",
            content=json.dumps(big_request(9_999, target), separators=(",", ":")),
            headers={"content-type": "application/json"},
        )
        assert warm.status_code == 200, warm.text
        state.cache.clear()
        gc.collect()
        before = rss_bytes()
        size = 0
        for k in range(posts):
            body = json.dumps(big_request(k, target), separators=(",", ":")).encode()
            size = len(body)
            response = client.post(
                "/srn/solve", content=body, headers={"content-type": "application/json"}
            )
            if response.status_code != 200:
                raise SystemExit(f"post {k}: {response.status_code} {response.text[:200]}")
            del body, response
        gc.collect()
        after = rss_bytes()
        entries = len(state.cache)
        body_bytes = state.cache.size_bytes

    growth = after - before
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}")
    print(f"{posts} distinct POST /srn/solve bodies of {size / 1e3:.0f} KB each (in process)\n")
    print(f"cache entries                {entries:>12}")
    print(f"cache body bytes (budgeted)  {body_bytes / 1e6:>12.2f} MB")
    print(f"RSS growth                   {growth / 1e6:>12.1f} MB")
    print(f"RSS growth per post          {growth / posts / 1e3:>12.1f} KB")
    print(
        json.dumps(
            {
                "posts": posts,
                "body_bytes": size,
                "cache_entries": entries,
                "cache_body_bytes": body_bytes,
                "rss_growth_bytes": growth,
            }
        )
    )


if __name__ == "__main__":
    main()
