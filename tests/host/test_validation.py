"""Workloads, host profiles and requests that make no sense are refused, naming the field.

Also: the built-in profile holds SPEC's values, results serialise to strict JSON, the
nets returned by ``end_system_nets`` solve (with the generic engine calls) to the same
answer as ``interrupt_service_time``, compiled shapes are cached and reused, and the
rates a shape computes without the expression engine are the engine's, bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rate_strategies import log_uniform

from host import (
    DEFAULT_PROFILE,
    HOST_PROFILES,
    HostProfile,
    Workload,
    WorkloadError,
    _shape,
    end_system_nets,
    host_profile,
    interrupt_service_time,
)
from host.service_time import DEFAULT_LIMITS
from srn import Limits, SRNError, reachability_graph, steady_state, time_to_absorption

SX280 = host_profile("sx280-2007")


def test_builtin_profile_holds_the_spec_values() -> None:
    assert DEFAULT_PROFILE == "sx280-2007"
    p = HOST_PROFILES["sx280-2007"]
    assert (p.mu_io_cpu, p.mu_disk, p.mu_net) == (4600.0, 1010.0, 41600.0)
    assert (p.buffer_packets, p.coalesce_packets) == (64, 6)
    assert (p.line_rate_bps, p.packet_payload_bytes) == (1e9, 1468)
    with pytest.raises(TypeError):
        HOST_PROFILES["mine"] = p  # type: ignore[index]


def test_unknown_profile_is_named() -> None:
    with pytest.raises(WorkloadError) as info:
        host_profile("sx999")
    assert info.value.field == "profile"
    assert "sx280-2007" in str(info.value)
    with pytest.raises(WorkloadError) as info:
        interrupt_service_time(Workload(1, 0), "nope")
    assert info.value.field == "profile"
    with pytest.raises(WorkloadError) as info:
        host_profile(3)  # type: ignore[arg-type]
    assert info.value.field == "profile"
    with pytest.raises(WorkloadError) as info:
        interrupt_service_time(Workload(1, 0), object())  # type: ignore[arg-type]
    assert info.value.field == "profile"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cpu_tasks": -1, "io_tasks": 0}, "cpu_tasks"),
        ({"cpu_tasks": 0, "io_tasks": -3}, "io_tasks"),
        ({"cpu_tasks": True, "io_tasks": 0}, "cpu_tasks"),
        ({"cpu_tasks": 1.0, "io_tasks": 0}, "cpu_tasks"),
        ({"cpu_tasks": 1, "io_tasks": 2.5}, "io_tasks"),
        ({"cpu_tasks": "2", "io_tasks": 0}, "cpu_tasks"),
        ({"cpu_tasks": None, "io_tasks": 0}, "cpu_tasks"),
        ({"cpu_tasks": 1, "io_tasks": 0, "cores": 0}, "cores"),
        ({"cpu_tasks": 1, "io_tasks": 0, "cores": -2}, "cores"),
        ({"cpu_tasks": 1, "io_tasks": 0, "cores": 257}, "cores"),
        ({"cpu_tasks": 1, "io_tasks": 0, "disks": 0}, "disks"),
        ({"cpu_tasks": 1, "io_tasks": 0, "disks": 17}, "disks"),
        ({"cpu_tasks": 1, "io_tasks": 0, "disks": False}, "disks"),
        ({"cpu_tasks": 1001, "io_tasks": 0}, "cpu_tasks"),
        ({"cpu_tasks": 0, "io_tasks": 10**9}, "io_tasks"),
        ({"cpu_tasks": 600, "io_tasks": 401}, "tasks"),
    ],
)
def test_nonsense_workloads_are_refused(kwargs, field) -> None:
    with pytest.raises(WorkloadError) as info:
        Workload(**kwargs)
    assert info.value.field == field
    assert isinstance(info.value, SRNError) and isinstance(info.value, ValueError)


def test_size_limits_are_named() -> None:
    with pytest.raises(WorkloadError) as info:
        Workload(600, 401)
    e = info.value
    assert (e.limit, e.maximum, e.reached) == ("max_tasks", 1000, 1001)
    with pytest.raises(WorkloadError) as info:
        Workload(1, 0, cores=300)
    assert (info.value.limit, info.value.maximum, info.value.reached) == ("max_cores", 256, 300)
    with pytest.raises(WorkloadError) as info:
        Workload(1, 0, disks=20)
    assert (info.value.limit, info.value.maximum) == ("max_disks", 16)


def test_limits_themselves_are_accepted() -> None:
    w = Workload(np.int64(744), np.int32(256), cores=np.int16(256), disks=16)
    assert w.to_dict() == {"cpu_tasks": 744, "io_tasks": 256, "cores": 256, "disks": 16}
    assert all(type(v) is int for v in w.to_dict().values())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("mu_io_cpu", 0.0),
        ("mu_disk", -1010.0),
        ("mu_net", math.nan),
        ("mu_net", math.inf),
        ("mu_net", True),
        ("mu_disk", "1010"),
        ("mu_io_cpu", None),
        ("mu_net", 1e13),
        ("mu_disk", 1e-9),
        ("buffer_packets", 0),
        ("buffer_packets", 64.0),
        ("buffer_packets", 10**8),
        ("coalesce_packets", 0),
        ("coalesce_packets", 65),
        ("line_rate_bps", 0.0),
        ("line_rate_bps", -1e9),
        ("line_rate_bps", math.inf),
        ("packet_payload_bytes", 0),
        ("packet_payload_bytes", 70_000),
        ("packet_payload_bytes", 1468.5),
        ("name", ""),
        ("name", "has space"),
        ("name", "x" * 65),
        ("name", 7),
    ],
)
def test_nonsense_profiles_are_refused(field: str, value) -> None:
    with pytest.raises(WorkloadError) as info:
        SX280.replace(**{field: value})
    assert info.value.field == field


def test_replace_validates_and_copies() -> None:
    fast = SX280.replace(mu_net=83_200)
    assert fast.name == "sx280-2007" and fast.mu_net == 83_200.0
    assert isinstance(fast.mu_net, float)
    assert SX280.mu_net == 41_600.0
    renamed = SX280.replace(name="my-host", mu_disk=2_000.0)
    assert renamed.name == "my-host"
    with pytest.raises(WorkloadError) as info:
        SX280.replace(mu_cpu=1.0)
    assert info.value.field == "mu_cpu"
    assert "mu_io_cpu" in str(info.value)
    assert HostProfile(**SX280.to_dict()) == SX280


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"times": [-1.0, 0.0]}, "times"),
        ({"times": [0.0, math.nan]}, "times"),
        ({"times": [[0.0, 1.0]]}, "times"),
        ({"times": ["soon"]}, "times"),
        ({"times": np.zeros(200_000)}, "times"),
        ({"quantiles": (0.5, 1.0)}, "quantiles"),
        ({"quantiles": (0.0,)}, "quantiles"),
        ({"quantiles": (True,)}, "quantiles"),
        ({"quantiles": ("p50",)}, "quantiles"),
        ({"quantiles": "0.5"}, "quantiles"),
        ({"quantiles": 0.5}, "quantiles"),
        ({"grid_points": 1}, "grid_points"),
        ({"grid_points": 2.0}, "grid_points"),
        # The default's value with another type: the defaults' shortcut must not pass it.
        ({"grid_points": 101.0}, "grid_points"),
        ({"grid_points": 10**7}, "grid_points"),
        ({"limits": {"max_states": 10}}, "limits"),
    ],
)
def test_nonsense_requests_are_refused(kwargs, field) -> None:
    with pytest.raises(WorkloadError) as info:
        interrupt_service_time(Workload(1, 1), **kwargs)
    assert info.value.field == field


def test_workload_must_be_a_workload() -> None:
    with pytest.raises(WorkloadError) as info:
        interrupt_service_time({"cpu_tasks": 1, "io_tasks": 0})  # type: ignore[arg-type]
    assert info.value.field == "workload"


def test_state_space_limit_is_enforced_before_building() -> None:
    cache_size = len(_shape.SHAPES)
    with pytest.raises(WorkloadError) as info:
        interrupt_service_time(Workload(0, 60, disks=16))  # 4.6e6 markings
    e = info.value
    assert (e.field, e.limit, e.maximum) == ("disks", "max_states", 300_000)
    assert e.reached > 1_000_000
    assert len(_shape.SHAPES) == cache_size  # nothing was built
    with pytest.raises(WorkloadError) as info:
        interrupt_service_time(Workload(0, 200), limits=Limits(max_states=100))
    assert (info.value.field, info.value.limit, info.value.reached) == (
        "io_tasks",
        "max_states",
        202,
    )


def test_results_are_strict_json() -> None:
    r = interrupt_service_time(Workload(2, 2, cores=2, disks=2))
    text = json.dumps(r.to_dict(include_phase_type=True), allow_nan=False)
    data = json.loads(text)
    assert data["rate_per_s"] == r.rate_per_s
    assert set(data["quantiles_s"]) == {"0.5", "0.9", "0.99"}
    assert len(data["cdf"]["times_s"]) == len(data["cdf"]["probability"]) == 101
    T = data["phase_type"]["T"]
    dense = np.zeros(T["shape"])
    dense[T["rows"], T["cols"]] = T["values"]
    np.testing.assert_array_equal(dense, r.phase_type()[1].toarray())
    assert data["workload"] == {"cpu_tasks": 2, "io_tasks": 2, "cores": 2, "disks": 2}
    assert data["profile"]["name"] == "sx280-2007"
    assert "phase_type" not in r.to_dict()


def test_given_times_are_used() -> None:
    times = [0.0, 1e-5, 5e-5, 1e-3]
    r = interrupt_service_time(Workload(1, 2), times=times, quantiles=())
    np.testing.assert_array_equal(r.times_s, times)
    assert r.cdf[0] == 0.0 and r.quantiles_s == {}
    np.testing.assert_allclose(r.cdf, r.cdf_at(times), atol=1e-15)


def test_phase_type_pair_is_a_sub_generator() -> None:
    alpha, T = interrupt_service_time(Workload(3, 3, disks=2)).phase_type()
    dense = T.toarray()
    assert alpha.sum() == pytest.approx(1.0, abs=1e-14)
    assert np.all(np.diag(dense) < 0)
    off = dense - np.diag(np.diag(dense))
    assert np.all(off >= 0)
    assert np.all(dense.sum(axis=1) < 0)  # every phase can complete the interrupt


@pytest.mark.parametrize("w", [Workload(2, 3), Workload(1, 4, cores=2, disks=3)])
def test_public_nets_solve_to_the_same_answer(w: Workload) -> None:
    """end_system_nets with the engine's generic calls: pi carried over as the
    vanishing initial marking of Fig. 1b, then time to absorption."""
    steady, tagged = end_system_nets(w, SX280)
    assert dict(steady.parameters) == {
        "mu_io_cpu": 4600.0,
        "mu_disk": 1010.0,
        "mu_net": 41600.0,
        "cpu_tasks": float(w.cpu_tasks),
        "cores": float(w.cores),
    }
    graph_a = reachability_graph(steady)
    pi = steady_state(graph_a.generator()).probabilities
    n = graph_a.n_states
    starts = np.column_stack([graph_a.markings, np.ones(n, int), np.zeros(n, int)])
    graph_b = reachability_graph(tagged, initial_markings=starts, initial_probabilities=pi)
    reference = time_to_absorption(graph_b.generator(), graph_b.initial_distribution)
    r = interrupt_service_time(w, SX280)
    assert r.mean_s == pytest.approx(reference.mean, rel=1e-12)
    assert r.variance_s2 == pytest.approx(reference.variance, rel=1e-12)
    for level, q in reference.quantiles.items():
        assert r.quantiles_s[level] == pytest.approx(q, rel=1e-10)


def test_shapes_are_cached_across_profiles_tasks_and_cores() -> None:
    _shape.SHAPES.clear()
    interrupt_service_time(Workload(1, 3))
    shape = _shape.SHAPES.get(3, 1, DEFAULT_LIMITS)
    misses = _shape.SHAPES.misses
    interrupt_service_time(Workload(4, 3, cores=8), SX280.replace(name="other", mu_net=1e5))
    assert _shape.SHAPES.misses == misses
    assert _shape.SHAPES.get(3, 1, DEFAULT_LIMITS) is shape


def test_shape_cache_is_bounded() -> None:
    cache = _shape.ShapeCache(max_entries=3, max_states=100)
    for io in range(6):
        cache.get(io, 1, DEFAULT_LIMITS)
    assert len(cache) == 3
    cache.get(90, 2, DEFAULT_LIMITS)  # 2116 states: alone over the state budget
    assert len(cache) == 1


@settings(max_examples=60, deadline=None)
@given(
    io=st.integers(0, 7),
    disks=st.integers(1, 4),
    cpu=st.integers(0, 900),
    cores=st.integers(1, 256),
    mu=st.tuples(*[log_uniform(1e-6, 1e12)] * 3),
)
def test_direct_edge_rates_are_the_engines_bit_for_bit(
    io: int, disks: int, cpu: int, cores: int, mu: tuple[float, float, float]
) -> None:
    """The shape computes the rates per call without the expression engine; the engine,
    evaluating the nets' rate expressions, is the reference."""
    shape = _shape.SHAPES.get(io, disks, DEFAULT_LIMITS)
    assert shape.rates_a is not None and shape.rates_b is not None  # the fast path is on
    values = {
        "mu_io_cpu": mu[0],
        "mu_disk": mu[1],
        "mu_net": mu[2],
        "cpu_tasks": float(cpu),
        "cores": float(cores),
    }
    engine_a = shape.graph_a.with_parameters(values).edge_rates()
    engine_b = shape.graph_b.with_parameters(values).edge_rates()
    assert np.array_equal(shape.rates_a(values), engine_a)
    assert np.array_equal(shape.rates_b(values), engine_b)


@pytest.mark.parametrize("w", [Workload(3, 2), Workload(1, 5, cores=2, disks=3)])
def test_engine_path_gives_the_same_result(w: Workload, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shape whose direct rates disagree with the engine uses the engine's rates (and
    its initial distribution): the answer is the same, bit for bit.  (Without direct
    rates there is no compiled small-chain solve, so both take the NumPy path; that
    solve is compared with it in test_small_chain.py.)"""
    monkeypatch.setattr(_shape.SmallChain, "of", classmethod(lambda cls, *args: None))
    _shape.SHAPES.clear()
    fast = interrupt_service_time(w, SX280).to_dict(include_phase_type=True)
    _shape.SHAPES.clear()
    with monkeypatch.context() as patch:
        patch.setattr(_shape.EdgeRates, "__call__", lambda self, p: np.zeros(self.n_edges))
        shape = _shape.SHAPES.get(w.io_tasks, w.disks, DEFAULT_LIMITS)
        assert shape.rates_a is None and shape.rates_b is None
        engine = interrupt_service_time(w, SX280).to_dict(include_phase_type=True)
    _shape.SHAPES.clear()
    assert json.dumps(engine) == json.dumps(fast)


def test_distribution_is_built_on_first_access() -> None:
    # The bottleneck rate needs only the mean: quantiles, CDF grid and T come on demand.
    r = interrupt_service_time(Workload(2, 3, disks=2), SX280)
    assert "absorption" not in vars(r) and "quantiles_s" not in vars(r)
    assert set(r.quantiles_s) == {0.5, 0.9, 0.99}
    assert r.absorption is r.absorption
    # E[S] is the direct elimination's (host._direct_chain); the phase-type pair's own
    # mean is another computation of it, equal to rounding.
    assert r.absorption.mean == pytest.approx(r.mean_s, rel=1e-12)
    assert r.times_s[-1] > r.quantiles_s[0.99] > r.quantiles_s[0.5] > 0


def test_profile_and_workload_dicts_hold_every_field() -> None:
    w = Workload(2, 3, cores=4, disks=2)
    assert w.to_dict() == dataclasses.asdict(w)
    assert list(SX280.to_dict()) == [f.name for f in dataclasses.fields(SX280)]
    assert SX280.to_dict() == dataclasses.asdict(SX280)
