"""One point: defaults, validation, and the answer of the whole method."""

from __future__ import annotations

import pytest

import transport
from host import Workload, host_profile
from planning import INPUT_FIELDS, PlanningError, evaluate_point, resolve_point

BASE = {"cpu_tasks": 2, "io_tasks": 1, "file_size": 500_000_000, "propagation_delay": 0.1}
# The paper's model, named: the checks against its pipeline and the SPEC's numbers.
PAPER = {**BASE, "model": "paper"}


def test_resolve_fills_the_profile_and_defaults() -> None:
    r = resolve_point(BASE)
    assert list(r) == list(INPUT_FIELDS)
    sx = host_profile("sx280-2007")
    assert (r["cores"], r["disks"], r["nic_service"]) == (1, 1, "exponential")
    assert r["mu_net"] == sx.mu_net and r["buffer_packets"] == sx.buffer_packets
    assert r["line_rate"] == sx.line_rate_bps and r["packet_payload"] == 1468


def test_the_record_is_the_pipelines_answer_bit_for_bit() -> None:
    # Reference: the transport library called directly with the same objects.
    point = {**PAPER, "cores": 2, "buffer_packets": 128, "line_rate": 1e10}
    record = evaluate_point(point)
    ref = transport.workload_bottleneck_rate(
        Workload(2, 1, cores=2),
        host_profile("sx280-2007").replace(buffer_packets=128, line_rate_bps=1e10),
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
    )
    assert record["effective_bottleneck_rate_bps"] == ref.bottleneck.rate_bps
    assert record["transfer_time_s"] == ref.bottleneck.transfer_time_s
    assert record["loss_probability"] == ref.bottleneck.loss
    assert record["interrupt_service_rate_per_s"] == ref.service.rate_per_s
    assert record["error"] is None


def test_spec_check_interrupt_rate_c1_i0() -> None:
    # SPEC section 2: C = 1, I = 0, m = 1 gives mu = 41600 / 2 = 20800 interrupts/s.
    record = evaluate_point({**PAPER, "cpu_tasks": 1, "io_tasks": 0})
    assert record["interrupt_service_rate_per_s"] == pytest.approx(20800.0, rel=1e-12)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"io_tasks": -1}, "io_tasks"),
        ({"profile": "nope"}, "profile"),
        ({"line_rate": 0.0}, "line_rate"),
        ({"propagation_delay": -1.0}, "propagation_delay"),
        ({"nic_service": "magic"}, "nic_service"),
        ({"colour": 1}, "colour"),
    ],
)
def test_bad_inputs_name_the_input(change: dict, field: str) -> None:
    with pytest.raises(PlanningError) as info:
        resolve_point({**BASE, **change})
    assert info.value.field == field
    # In a sweep the point carries the error instead of stopping the others.
    assert evaluate_point({**BASE, **change})["error"].startswith(field + ":")


def test_missing_required_input() -> None:
    with pytest.raises(PlanningError, match="required") as info:
        resolve_point({"cpu_tasks": 1, "io_tasks": 0, "file_size": 10})
    assert info.value.field == "propagation_delay"


def test_the_default_model_is_the_products_and_timeslice_is_the_librarys() -> None:
    r = resolve_point(BASE)
    assert r["model"] == transport.DEFAULT_RECEIVER_MODEL == "timeslice"
    # The time-slice model at a built-in profile: the library called directly with the
    # kernel's default slice, no kernel or wake-up cost (no calibration) and the
    # receiver's default settle time, as GET /bottleneck-rate?model=timeslice does.
    point = {"cpu_tasks": 2, "io_tasks": 0, "file_size": 20_000_000, "propagation_delay": 0.01}
    record = evaluate_point(point)
    assert record == evaluate_point({**point, "model": "timeslice"})
    ref = transport.time_slice_bottleneck_rate(
        Workload(2, 0),
        host_profile("sx280-2007"),
        file_size_bytes=20_000_000,
        propagation_delay_s=0.01,
        time_slice_s=transport.DEFAULT_TIME_SLICE_S,
        settle_s=transport.DEFAULT_SETTLE_S,
    )
    assert record["effective_bottleneck_rate_bps"] == ref.rate_bps
    assert record["loss_probability"] == ref.first_round_loss
    assert record["rounds"] == ref.rounds and record["error"] is None


@pytest.mark.parametrize(
    ("point", "field"),
    [
        ({"model": "magic"}, "model"),
        ({"model": "timeslice", "nic_service": "phase-type"}, "nic_service"),
        ({"model": "timeslice", "buffer_packets": 4096, "coalesce_packets": 64}, "buffer_packets"),
    ],
)
def test_a_model_it_cannot_answer_is_named(point: dict[str, object], field: str) -> None:
    with pytest.raises(PlanningError) as err:
        resolve_point({**BASE, "io_tasks": 0, **point})
    assert err.value.field == field
