"""The ablation and the paired score of ``benchmarks/send_auto.py``.

References: the contention formula of :func:`host.kernel_path.measure_competitors`
(``c = left * capacity / drained - 1``) applied with each capacity, for the ablation's
c_C; closed forms on made-up cells with no noise, for the paired score.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from host import DEFAULT_PROFILE, host_profile
from transport import time_slice_costs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # send_auto imports its sibling veth_link
_spec = importlib.util.spec_from_file_location("send_auto", ROOT / "benchmarks" / "send_auto.py")
assert _spec is not None and _spec.loader is not None
send_auto = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(send_auto)


def test_the_ablation_is_the_calibration_without_its_wake_up_fit() -> None:
    left, drained, b, mu, n = 0.97, 60_000.0, 4.0e-6, 11_000.0, 16
    c_fit = [left * (1.0 / b) / (drained * k) - 1.0 for k in (1.0, 1.5, 2.0)]
    profile = {**host_profile(DEFAULT_PROFILE).to_dict(), "mu_net": 7_000.0}
    profile["coalesce_packets"] = n
    provenance: dict[str, Any] = {
        "net": {"mu_net": {"mean": mu}, "batch_packets": n},
        "wakeup_s": 6e-5,
        "per_datagram_s": b,
        "effective_competitors": c_fit,
        "method": "blastrate calibrate",
    }
    before, before_provenance = send_auto.without_wakeup_fit(profile, provenance)
    assert before["mu_net"] == mu and profile["mu_net"] == 7_000.0  # a copy
    assert "wakeup_s" not in before_provenance and "per_datagram_s" not in before_provenance
    # The same drained rates, solved with the never-sleeping capacity mu N.
    expected = [left * mu * n / (drained * k) - 1.0 for k in (1.0, 1.5, 2.0)]
    assert before_provenance["effective_competitors"] == pytest.approx(expected, rel=1e-12)
    costs = time_slice_costs(before_provenance, host_profile(DEFAULT_PROFILE))
    assert costs.wakeup_s == 0.0


def _cell(host: str, cpu: int, times: list[float]) -> dict[str, Any]:
    blocks = [{"auto": {"ok": True, "total_s": t}} for t in times]
    return {"host": host, "cpu_tasks": cpu, "rcvbuf": None, "delay": "10ms", "blocks": blocks}


def test_the_paired_score_is_the_ratio_of_geometric_means_setting_by_setting() -> None:
    rng = np.random.default_rng(1)
    cells = [
        _cell("calibrated", 0, [0.9, 0.9]),
        _cell("calibrated-no-wakeup", 0, [1.0, 1.0]),
        _cell("calibrated", 1, [2.0, 8.0]),  # geometric mean 4
        _cell("calibrated-no-wakeup", 1, [5.0, 5.0]),
        _cell("calibrated", 2, [1.0]),  # no partner: left out
    ]
    got = send_auto.host_against_host(cells, "calibrated", "calibrated-no-wakeup", rng)
    assert got["settings"] == 2
    assert got["gmean"] == pytest.approx(float(np.sqrt(0.9 * 0.8)), rel=1e-12)
    lo, hi = got["ci95"]
    assert lo <= got["gmean"] <= hi
    none = send_auto.host_against_host(cells[:1], "calibrated", "calibrated-no-wakeup", rng)
    assert none == {"settings": 0, "gmean": None, "ci95": None}
