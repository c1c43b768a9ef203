"""Which single upgrade of a host helps a transfer most, and how sensitive the rate is.

:func:`what_if` takes a workload, a host and a transfer (a point, see
:mod:`planning.points`) and evaluates every single change a person could make:

* one more core (``cores + 1``);
* a faster interrupt path (``mu_net`` x1.5 and x2);
* a larger NIC ring (``buffer_packets`` x2 and x4, at most ``max_buffer_packets``);
* another interrupt coalescing ``N`` (:data:`COALESCE_CANDIDATES`, at most K);
* one CPU-bound task fewer;
* a faster line (the next of :data:`LINE_RATES_BPS` above the current one).

Each is ranked by the transfer time it saves.  It also finds the best (K, N) on the grid
``K in {K0 * 2**j} + {max_buffer_packets}``, ``N in COALESCE_CANDIDATES + {N0}`` (N <= K)
with the ``ethtool`` commands that set them, and the local elasticities
``d ln(rate) / d ln(parameter)`` by central differences.

Elasticity step: each parameter p is moved to ``p (1 + h)`` and ``p / (1 + h)`` with
``h = 0.05`` (:data:`ELASTICITY_STEP`), and the elasticity is
``(ln r+ - ln r-) / (ln p+ - ln p-)``.  The step is a few percent, not the 1e-6 of a
smooth function's derivative, because the rate comes from a search resolved to 0.1 Mbps
and T has jumps (``ceil(N_resend)``): a tiny step would measure the search grid.  Integer
parameters (K, N) are rounded and moved by at least one; when N = 1 (no lower value) the
difference is one-sided (``method="forward"``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from host import MAX_CORES

from .errors import PlanningError
from .points import resolve_point
from .variants import evaluate_variants

__all__ = [
    "COALESCE_CANDIDATES",
    "DEFAULT_MAX_BUFFER_PACKETS",
    "ELASTICITY_PARAMETERS",
    "ELASTICITY_STEP",
    "LINE_RATES_BPS",
    "WhatIf",
    "elasticities",
    "what_if",
]

#: Default largest NIC receive ring (packets): 4096 is the ``ethtool -g`` "Pre-set
#: maximum" RX of common 1/10 GbE server NICs (Intel 82599/X540, i350).
DEFAULT_MAX_BUFFER_PACKETS = 4096
#: Coalescing batches tried (packets per interrupt).
COALESCE_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
#: Standard Ethernet line rates (bit/s); "a faster line" is the next one up.
LINE_RATES_BPS = (1e8, 1e9, 2.5e9, 5e9, 1e10, 2.5e10, 4e10, 1e11, 2e11, 4e11)
#: Relative step h of the central differences (see the module docstring).
ELASTICITY_STEP = 0.05
#: Parameters whose elasticity is reported.
ELASTICITY_PARAMETERS = (
    "mu_net",
    "mu_io_cpu",
    "mu_disk",
    "line_rate",
    "buffer_packets",
    "coalesce_packets",
    "propagation_delay",
)
_INTEGER = {"buffer_packets", "coalesce_packets"}
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")  # Linux IFNAMSIZ is 16 with the NUL


@dataclass(frozen=True)
class WhatIf:
    """The baseline, the ranked changes, the best ring settings and the elasticities.

    Attributes
    ----------
    baseline : dict
        The point's record (inputs and results, see :func:`planning.evaluate_point`).
    changes : list of dict
        One per change, most time saved first (changes without an answer last): ``change``
        (an id), ``description``, ``parameter``, ``before``, ``after``,
        ``effective_bottleneck_rate_bps`` (bit/s), ``transfer_time_s`` (s),
        ``time_saved_s`` (s, > 0 is faster), ``rate_gain_bps`` (bit/s), ``limited_by``,
        ``loss_probability`` and ``error``.
    best_ring : dict
        ``buffer_packets`` K and ``coalesce_packets`` N with the shortest transfer on the
        grid, the rate (bit/s) and time (s) there, ``time_saved_s``, ``grid`` (points
        tried) and ``commands`` (the two ``ethtool`` lines).
    elasticities : list of dict
        ``parameter``, ``value``, ``rate_elasticity`` and ``time_elasticity``
        (dimensionless; None when a side has no answer), ``method`` and the two values
        used (``low``, ``high``).
    max_buffer_packets : int
        Largest ring considered (packets).
    """

    baseline: dict[str, Any]
    changes: list[dict[str, Any]]
    best_ring: dict[str, Any] | None
    elasticities: list[dict[str, Any]]
    max_buffer_packets: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "baseline": self.baseline,
            "changes": self.changes,
            "best_ring": self.best_ring,
            "elasticities": self.elasticities,
            "max_buffer_packets": self.max_buffer_packets,
        }


def _changes(
    point: Mapping[str, Any], max_k: int
) -> list[tuple[str, str, str, Any, Any, dict[str, Any]]]:
    """(id, description, parameter, before, after, changed point) of each single change."""
    out = []

    def add(change: str, text: str, name: str, after: Any) -> None:
        out.append((change, text, name, point[name], after, {**point, name: after}))

    if point["cores"] < MAX_CORES:
        add("one-more-core", "one more core", "cores", point["cores"] + 1)
    for factor in (1.5, 2.0):
        add(
            f"mu-net-x{factor:g}",
            f"a faster interrupt path (mu_net x{factor:g})",
            "mu_net",
            point["mu_net"] * factor,
        )
    k = point["buffer_packets"]
    for factor in (2, 4):
        bigger = min(k * factor, max_k)
        if bigger > k and (factor == 2 or bigger > min(2 * k, max_k)):
            add(
                f"ring-x{factor}",
                f"a larger NIC ring (K x{factor}"
                + (", the NIC's maximum)" if bigger == max_k and bigger < k * factor else ")"),
                "buffer_packets",
                bigger,
            )
    for n in COALESCE_CANDIDATES:
        if n != point["coalesce_packets"] and n <= k:
            add(f"coalesce-{n}", f"interrupt coalescing N = {n}", "coalesce_packets", n)
    if point["cpu_tasks"] > 0:
        add("one-cpu-task-fewer", "one CPU-bound task fewer", "cpu_tasks", point["cpu_tasks"] - 1)
    faster = [r for r in LINE_RATES_BPS if r > point["line_rate"]]
    if faster:
        add("faster-line", f"a faster line ({faster[0] / 1e9:g} Gbit/s)", "line_rate", faster[0])
    return out


def _steps(name: str, value: float, h: float) -> tuple[float, float, str]:
    if name in _INTEGER:
        v = int(value)
        high = max(v + 1, round(v * (1 + h)))
        low = min(v - 1, round(v / (1 + h)))
        if low < 1:
            return v, high, "forward"
        return low, high, "central"
    return value / (1 + h), value * (1 + h), "central"


#: Elasticities smaller than this are reported as 0 (the rate search's resolution).
_ELASTICITY_ZERO = 5e-4

# One line for each sign that surprises: a faster or larger resource that lowers the rate.
_SURPRISES = {
    "mu_disk": "a faster disk keeps the I/O-bound tasks on the CPU longer, where they "
    "compete with the receiver",
    "buffer_packets": "a larger ring loses less, so the best rate is a little lower and the "
    "transfer still ends sooner",
    "line_rate": "a faster line overruns the receiver more in each burst",
}


def _elasticity_note(name: str, rate_elasticity: float) -> str | None:
    """Why a parameter's rate elasticity has a surprising sign, or None."""
    if name == "propagation_delay" or rate_elasticity >= 0:
        return None
    return _SURPRISES.get(name)


def elasticities(
    point: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    *,
    step: float = ELASTICITY_STEP,
    parameters: tuple[str, ...] = ELASTICITY_PARAMETERS,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Local elasticities ``d ln(rate) / d ln(p)`` and ``d ln(T) / d ln(p)``.

    Parameters
    ----------
    point : mapping
        Inputs named as ``GET /bottleneck-rate`` names them (SI units).
    baseline : mapping, optional
        The point's record, used for one-sided differences (computed if needed).
    step : float, default 0.05
        Relative step h: p moves to ``p / (1 + h)`` and ``p (1 + h)``.
    parameters : tuple of str
        Inputs to differentiate (default :data:`ELASTICITY_PARAMETERS`).
    threads : int, optional
        Threads for the NIC queue searches.

    Returns
    -------
    list of dict
        Per parameter: ``parameter``, ``value``, ``low``, ``high``, ``method``
        (``"central"`` or ``"forward"``), ``rate_elasticity`` and ``time_elasticity``
        (dimensionless; None if a side has no answer).

    Raises
    ------
    PlanningError
        Naming the input at fault, or ``step`` outside (0, 1].
    """
    if not (0.0 < step <= 1.0):
        raise PlanningError("step", f"must be in (0, 1], got {step!r}")
    resolved = resolve_point(point)
    plan = []
    variants = []
    for name in parameters:
        low, high, method = _steps(name, resolved[name], step)
        plan.append((name, low, high, method))
        for value in (low, high):
            variants.append({**resolved, name: value})
    need_base = any(m == "forward" for *_, m in plan) and baseline is None
    records = evaluate_variants(variants + ([resolved] if need_base else []), threads=threads)
    base = records[-1] if need_base else baseline
    out = []
    for k, (name, low, high, method) in enumerate(plan):
        lo, hi = records[2 * k], records[2 * k + 1]
        if method == "forward":
            lo = dict(base) if base is not None else lo
        entry: dict[str, Any] = {
            "parameter": name,
            "value": resolved[name],
            "low": low,
            "high": high,
            "method": method,
            "rate_elasticity": None,
            "time_elasticity": None,
            "note": None,
        }
        if lo["error"] is None and hi["error"] is None:
            d = math.log(high) - math.log(low)
            entry["rate_elasticity"] = (
                math.log(hi["effective_bottleneck_rate_bps"])
                - math.log(lo["effective_bottleneck_rate_bps"])
            ) / d
            entry["time_elasticity"] = (
                math.log(hi["transfer_time_s"]) - math.log(lo["transfer_time_s"])
            ) / d
            for key in ("rate_elasticity", "time_elasticity"):
                if abs(entry[key]) < _ELASTICITY_ZERO:
                    entry[key] = 0.0  # the search's resolution, not an effect
            entry["note"] = _elasticity_note(name, entry["rate_elasticity"])
        out.append(entry)
    return out


def what_if(
    point: Mapping[str, Any],
    *,
    max_buffer_packets: int = DEFAULT_MAX_BUFFER_PACKETS,
    interface: str = "eth0",
    step: float = ELASTICITY_STEP,
    threads: int | None = None,
) -> WhatIf:
    """Rank the single upgrades of a host by the transfer time they save.

    Parameters
    ----------
    point : mapping
        Workload, host and transfer, named as ``GET /bottleneck-rate`` names them (SI
        units): ``cpu_tasks``, ``io_tasks``, ``file_size`` (bytes), ``propagation_delay``
        (s) and optionally ``cores``, ``disks``, ``profile`` and the host overrides.
    max_buffer_packets : int, default 4096
        The NIC's largest receive ring (packets): the ring changes and the (K, N) grid
        stop there (``ethtool -g IF`` shows it as the RX "Pre-set maximum").
    interface : str, default "eth0"
        Network interface named in the ``ethtool`` commands.
    step : float, default 0.05
        Relative step of the elasticities (see the module docstring).
    threads : int, optional
        Threads for the NIC queue searches; default: the CPUs available.

    Returns
    -------
    WhatIf
        Baseline, ranked changes, best (K, N) with ``ethtool`` commands, elasticities.

    Raises
    ------
    PlanningError
        Naming the input at fault; ``field="loss"`` when the baseline itself has no
        sending rate at which the transfer completes.

    Examples
    --------
    >>> w = what_if(
    ...     {"cpu_tasks": 3, "io_tasks": 0, "file_size": 10**8, "propagation_delay": 0.01},
    ...     max_buffer_packets=128,
    ... )
    >>> w.changes[0]["time_saved_s"] > 0
    True
    """
    if not (0.0 < step <= 1.0):
        raise PlanningError("step", f"must be in (0, 1], got {step!r}")
    if not _INTERFACE.match(interface):
        raise PlanningError("interface", "1-15 letters, digits or _ . : - (a Linux name)")
    if isinstance(max_buffer_packets, bool) or not isinstance(max_buffer_packets, int):
        raise PlanningError("max_buffer_packets", "must be a whole number of packets")
    # Seventy variants and their elasticities: 27 s of the time-slice model at the
    # built-in profile and a ring of up to 4,096 (0.7 s of the paper's; benchmarks/
    # whatif_models.py), too long to wait
    # for, so the ranking is the paper's model's unless another is named, and that one
    # is refused (docs/planning.md).
    resolved = resolve_point({**point, "model": point.get("model") or "paper"})
    if resolved["model"] != "paper":
        raise PlanningError(
            "model",
            "what-if ranks upgrades with the paper's model only (model=paper, the default "
            "here): the time-slice model would take about 30 s for its 70 variants",
        )
    if max_buffer_packets < resolved["buffer_packets"]:
        raise PlanningError(
            "max_buffer_packets",
            f"{max_buffer_packets} is below the current ring buffer_packets="
            f"{resolved['buffer_packets']}",
        )
    changes = _changes(resolved, max_buffer_packets)
    k0, n0 = resolved["buffer_packets"], resolved["coalesce_packets"]
    ks = sorted(
        {*(k0 * 2**j for j in range(32) if k0 * 2**j <= max_buffer_packets), max_buffer_packets}
    )
    ns = sorted({*COALESCE_CANDIDATES, n0})
    grid = [(k, n) for k in ks for n in ns if n <= k]
    variants = (
        [resolved]
        + [c[5] for c in changes]
        + [{**resolved, "buffer_packets": k, "coalesce_packets": n} for k, n in grid]
    )
    records = evaluate_variants(variants, threads=threads)
    baseline = records[0]
    if baseline["error"] is not None:
        raise PlanningError("loss", baseline["error"].split(": ", 1)[-1])
    t0 = baseline["transfer_time_s"]
    r0 = baseline["effective_bottleneck_rate_bps"]
    # The rate search stops at 0.1 Mbit/s: a time difference below this share of the
    # transfer time is the search's resolution, not the change's effect.
    noise = t0 * max(1e-6, 1e5 / r0)
    ranked = []
    for (change, text, name, before, after, _), rec in zip(
        changes, records[1 : 1 + len(changes)], strict=True
    ):
        ok = rec["error"] is None
        saved = t0 - rec["transfer_time_s"] if ok else None
        gain = rec["effective_bottleneck_rate_bps"] - r0 if ok else None
        note = None
        if saved is not None and abs(saved) <= noise:
            saved, note = 0.0, "no change (within the rate search's 0.1 Mbit/s resolution)"
        elif saved is not None and gain is not None and saved > 0 and gain < 0:
            note = "a lower rate that loses less: fewer packets to resend, so sooner done"
        ranked.append(
            {
                "change": change,
                "description": text,
                "parameter": name,
                "before": before,
                "after": after,
                "effective_bottleneck_rate_bps": rec["effective_bottleneck_rate_bps"],
                "transfer_time_s": rec["transfer_time_s"],
                "time_saved_s": saved,
                "rate_gain_bps": gain,
                "loss_probability": rec["loss_probability"],
                "limited_by": rec["limited_by"],
                "error": rec["error"],
                "note": note,
            }
        )
    ranked.sort(key=lambda c: (c["time_saved_s"] is None, -(c["time_saved_s"] or 0.0)))
    best_ring = None
    tried = [
        (kn, r)
        for kn, r in zip(grid, records[1 + len(changes) :], strict=True)
        if r["error"] is None
    ]
    if tried:
        (k, n), rec = min(tried, key=lambda item: (item[1]["transfer_time_s"], item[0]))
        best_ring = {
            "buffer_packets": k,
            "coalesce_packets": n,
            "effective_bottleneck_rate_bps": rec["effective_bottleneck_rate_bps"],
            "transfer_time_s": rec["transfer_time_s"],
            "time_saved_s": t0 - rec["transfer_time_s"],
            "grid": len(grid),
            "commands": [
                f"ethtool -G {interface} rx {k}",
                f"ethtool -C {interface} rx-frames {n}",
            ],
        }
    return WhatIf(
        baseline=baseline,
        changes=ranked,
        best_ring=best_ring,
        elasticities=elasticities(resolved, baseline, step=step, threads=threads),
        max_buffer_packets=max_buffer_packets,
    )
