"""Jobs that the worker pool runs: plain JSON data in, plain JSON data out.

The fork server imports this module once (with NumPy, SciPy and the libraries), so every
worker process it forks starts warm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.operations.nic import solve_nic_queue, transfer_time_curve
from app.operations.srn_solve import SolveBudget, solve_srn
from app.operations.whole_method import run_method

from .native_threads import native_thread_counts

__all__ = ["JOBS"]


def _srn_job(payload: dict[str, Any]) -> dict[str, Any]:
    return solve_srn(payload["request"], SolveBudget(**payload["budget"]))


def _nic_job(payload: dict[str, Any]) -> dict[str, Any]:
    return solve_nic_queue(payload["request"])


def _transfer_job(payload: dict[str, Any]) -> dict[str, Any]:
    return transfer_time_curve(payload["request"])


def _threads_job(payload: dict[str, Any]) -> dict[str, Any]:
    """The worker's native thread pools (a diagnostic: what the limits left)."""
    return {"native_threads": native_thread_counts()}


#: Job name -> function run in a worker process.
JOBS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "srn-solve": _srn_job,
    "nic-queue": _nic_job,
    "transfer-time": _transfer_job,
    "method": run_method,
    "native-threads": _threads_job,
}
