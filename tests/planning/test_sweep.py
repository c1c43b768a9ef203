"""Sweeps: the product of axes, batching, and answers identical to one call per point
wherever the points run (inline, a local process pool, a Dask cluster)."""

from __future__ import annotations

import csv
import io
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning import (
    INPUT_FIELDS,
    RESULT_FIELDS,
    PlanningError,
    evaluate_point,
    plan_batches,
    run_sweep,
    sweep_points,
)

BASE = {"file_size": 200_000_000, "propagation_delay": 0.05}
# 12 points over 3 (I, d) shapes and two rings.
AXES: dict[str, list[Any]] = {
    "io_tasks": [0, 1, 3],
    "cpu_tasks": [0, 2],
    "buffer_packets": [64, 128],
}


def _bits(record: dict[str, Any]) -> tuple[Any, ...]:
    """The record with every float as its IEEE-754 bit pattern (bitwise comparison)."""
    return tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in record.values())


@pytest.fixture(scope="module")
def reference() -> list[dict[str, Any]]:
    """One call per point, in this process, in product order."""
    return [evaluate_point(p) for p in sweep_points(BASE, AXES)]


def test_points_are_the_product_last_axis_fastest() -> None:
    pts = sweep_points({"cpu_tasks": 1}, {"io_tasks": [0, 1], "cores": [1, 2, 4]})
    assert [(p["io_tasks"], p["cores"]) for p in pts] == [
        (0, 1),
        (0, 2),
        (0, 4),
        (1, 1),
        (1, 2),
        (1, 4),
    ]


def test_too_many_points_names_the_limit() -> None:
    with pytest.raises(PlanningError) as info:
        sweep_points(
            BASE, {"io_tasks": list(range(100)), "cpu_tasks": list(range(100))}, max_points=9_999
        )
    assert (info.value.field, info.value.limit) == ("points", "max_points")
    assert (info.value.maximum, info.value.reached) == (9_999, 10_000)


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3)), min_size=0, max_size=60),
    st.integers(1, 4),
    st.one_of(st.none(), st.integers(1, 9)),
)
@settings(max_examples=60, deadline=None)
def test_batches_partition_the_points_grouped_by_shape(
    shapes: list[tuple[int, int]], workers: int, size: int | None
) -> None:
    pts = [{"io_tasks": i, "disks": d} for i, d in shapes]
    batches = plan_batches(pts, workers, size)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(pts)))  # every point exactly once
    # In the concatenated order each (I, d) shape is one contiguous run: a worker
    # compiles a shape once per batch at most.
    keys = [(pts[i]["io_tasks"], pts[i]["disks"]) for i in flat]
    runs = [k for j, k in enumerate(keys) if j == 0 or keys[j - 1] != k]
    assert len(runs) == len(set(keys))


def test_inline_sweep_is_bitwise_one_call_per_point(reference: list[dict[str, Any]]) -> None:
    result = run_sweep(BASE, AXES, inline=True, batch_size=5)
    assert result.ran_on == "inline"
    assert [_bits(r) for r in result.records] == [_bits(r) for r in reference]
    assert all(r["error"] is None for r in result.records)


def test_process_pool_sweep_is_bitwise_one_call_per_point(
    reference: list[dict[str, Any]],
) -> None:
    seen: list[int] = []
    result = run_sweep(BASE, AXES, workers=2, progress=lambda n, _t: seen.append(n))
    assert result.ran_on == "processes" and result.batches > 1
    assert [_bits(r) for r in result.records] == [_bits(r) for r in reference]
    assert seen == sorted(seen) and seen[-1] == len(reference)


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """A small Dask cluster in this process (two single-threaded workers)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def test_dask_sweep_is_bitwise_one_call_per_point(
    reference: list[dict[str, Any]], dask_client: Any
) -> None:
    result = run_sweep(BASE, AXES, cluster=dask_client, batch_size=3)
    assert (result.ran_on, result.workers, result.batches) == ("dask", 2, 4)
    assert [_bits(r) for r in result.records] == [_bits(r) for r in reference]


def test_dask_by_address(reference: list[dict[str, Any]], dask_client: Any) -> None:
    address = dask_client.scheduler.address
    result = run_sweep(BASE, AXES, cluster=address)
    assert [_bits(r) for r in result.records] == [_bits(r) for r in reference]


def test_unreachable_cluster_is_named() -> None:
    try:
        run_sweep(BASE, {"io_tasks": [0, 1]}, cluster="tcp://127.0.0.1:9", connect_timeout_s=1)
    except PlanningError as exc:
        field, reason = exc.field, exc.reason
    else:
        pytest.fail("an unreachable scheduler must raise PlanningError")
    assert field == "cluster" and "cannot reach" in reason


def test_a_failing_point_does_not_stop_the_others() -> None:
    result = run_sweep(
        {**BASE, "cpu_tasks": 1, "io_tasks": 0},
        {"coalesce_packets": [4, 100], "buffer_packets": [64]},
        inline=True,
    )
    ok, bad = result.records
    assert ok["error"] is None and ok["effective_bottleneck_rate_bps"] > 0
    assert bad["error"].startswith("coalesce_packets:")
    assert bad["effective_bottleneck_rate_bps"] is None
    assert result.to_dict()["failed"] == 1


def test_csv_reads_back_bit_for_bit(reference: list[dict[str, Any]]) -> None:
    result = run_sweep(BASE, AXES, inline=True)
    rows = list(csv.DictReader(io.StringIO(result.to_csv())))
    assert list(rows[0]) == [*INPUT_FIELDS, *RESULT_FIELDS]
    for row, record in zip(rows, reference, strict=True):
        assert (
            float(row["effective_bottleneck_rate_bps"]) == record["effective_bottleneck_rate_bps"]
        )
        assert float(row["transfer_time_s"]) == record["transfer_time_s"]
        assert int(row["io_tasks"]) == record["io_tasks"]


def test_timeout_names_the_limit() -> None:
    with pytest.raises(PlanningError) as info:
        run_sweep(BASE, AXES, inline=True, batch_size=1, timeout_s=1e-9)
    assert info.value.limit == "timeout_s"


@pytest.mark.parametrize("cancelled", [False, True])
def test_a_process_sweep_returns_after_its_pool_has_ended(cancelled: bool) -> None:
    """CPython 3.11's exit hook writes, unlocked, to the wake-up pipe of every process
    pool's manager thread, which closes that pipe as it ends: a program ending while the
    thread ended printed "Exception ignored ... Bad file descriptor" (a Ctrl-C on a CLI
    sweep, seen once in CI).  A sweep returns only after the thread has ended, its pipe
    closed, so the hook skips it.  Reads ``concurrent.futures.process`` internals."""
    from concurrent.futures import process

    cancel = threading.Event()
    if cancelled:
        cancel.set()
    try:
        run_sweep(BASE, AXES, workers=2, batch_size=4, cancel=cancel)
    except PlanningError as exc:
        assert cancelled and exc.field == "cancelled"
    else:
        assert not cancelled
    left = [t for t, wakeup in process._threads_wakeups.items() if not wakeup._closed]
    assert left == []
