"""BLAS/OpenMP thread limits are applied by the program itself (issue #13, item 16).

Before, only ``scripts/_venv.sh`` exported ``OPENBLAS_NUM_THREADS=1``; ``uvicorn
app.main:app`` or an installed package ran with one BLAS thread per core.  The checks
read the live thread pools with threadpoolctl, in the server process and in a worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

from threadpoolctl import threadpool_info, threadpool_limits

from app import Settings, create_app
from app.runtime.pool import SolvePool


def blas_threads() -> set[int]:
    return {int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_app_start_limits_blas_threads_in_a_fresh_process() -> None:
    # A fresh interpreter with no thread variables, as `uvicorn app.main:app` would have.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    code = (
        "import json, threadpoolctl\n"
        "from app import Settings, create_app\n"
        "create_app(Settings(warm_up=False, log_level='warning', blas_threads={n}))\n"
        "print(json.dumps([l['num_threads'] for l in threadpoolctl.threadpool_info()"
        " if l['user_api'] == 'blas']))\n"
    )
    for n in (1, 2):
        out = subprocess.run(
            [sys.executable, "-c", code.format(n=n)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        counts = json.loads(out.strip().splitlines()[-1])
        assert counts and set(counts) == {n}, out


def test_create_app_applies_the_setting_here() -> None:
    with threadpool_limits(limits=2):
        create_app(Settings(warm_up=False, log_level="warning", blas_threads=1))
        assert blas_threads() == {1}


def test_pool_workers_get_the_limit() -> None:
    async def ask(pool: SolvePool) -> dict[str, Any]:
        result: dict[str, Any] = await pool.run("native-threads", {}, 60.0)
        return result

    for n in (1, 3):
        pool = SolvePool(1, 1, blas_threads=n)
        try:
            counts = asyncio.run(ask(pool))["native_threads"]
        finally:
            pool.close()
        blas = [v for k, v in counts.items() if k.startswith("blas:")]
        assert blas and set(blas) == {n}, counts
