"""Invalid parameters are rejected with a ValueError naming the parameter and the reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from queues import QueueParameterError, bulk_service_queue, loss_probability

MU = 20_800.0
GOOD: dict[str, Any] = {
    "arrival_rate": 50_000.0,
    "service_rate": MU,
    "capacity": 64,
    "batch": 6,
}


def call(**changes: Any) -> None:
    kwargs = {**GOOD, **changes}
    bulk_service_queue(
        kwargs.pop("arrival_rate"),
        kwargs.pop("service_rate"),
        kwargs.pop("capacity"),
        kwargs.pop("batch"),
        **kwargs,
    )


@pytest.mark.parametrize(
    ("changes", "parameter", "reason"),
    [
        ({"capacity": 4, "batch": 6}, "capacity", "at least the batch size"),
        ({"arrival_rate": 0.0}, "arrival_rate", "strictly positive"),
        ({"arrival_rate": [5e4, -1.0]}, "arrival_rate", "strictly positive"),
        ({"arrival_rate": np.nan}, "arrival_rate", "finite"),
        ({"arrival_rate": [[1.0, 2.0]]}, "arrival_rate", "1-D"),
        ({"arrival_rate": []}, "arrival_rate", "at least one"),
        ({"service_rate": 0.0}, "service_rate", "strictly positive"),
        ({"service_rate": -MU}, "service_rate", "strictly positive"),
        ({"service_rate": None}, "service_rate", "required"),
        ({"batch": 6.5}, "batch", "integer"),
        ({"batch": "6"}, "batch", "integer"),
        ({"batch": True}, "batch", "integer"),
        ({"batch": 0}, "batch", "at least 1"),
        ({"capacity": 64.5}, "capacity", "integer"),
        ({"min_batch": 7}, "min_batch", "must not exceed"),
        ({"min_batch": 2.5}, "min_batch", "integer"),
        ({"min_batch": 0}, "min_batch", "at least 1"),
        ({"packet_bytes": 0}, "packet_bytes", "strictly positive"),
        ({"arrival_rate": np.ones(1000), "capacity": 60_000}, "arrival_rate", "exceed"),
    ],
)
def test_rejected_with_named_parameter(
    changes: dict[str, Any], parameter: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason) as info:
        call(**changes)
    assert isinstance(info.value, QueueParameterError)
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"{parameter}:")


ERLANG2 = (np.array([1.0, 0.0]), np.array([[-2 * MU, 2 * MU], [0.0, -2 * MU]]))
START = np.array([1.0, 0.0])
POSITIVE_DIAGONAL = np.array([[1.0, 0.0], [0.0, -1.0]])
NEGATIVE_OFF_DIAGONAL = np.array([[-1.0, -1.0], [0.0, -1.0]])
POSITIVE_ROW_SUM = np.array([[-1.0, 2.0], [0.0, -1.0]])
# Phases 0 and 1 feed each other and never exit: absorption is not certain.
TRAPPED = np.array([[-1.0, 1.0], [1.0, -1.0]])


@pytest.mark.parametrize(
    ("phase_type", "service_rate", "parameter", "reason"),
    [
        (ERLANG2, MU, "service_rate", "must be None when phase_type"),
        ((np.array([0.5, 0.4]), ERLANG2[1]), None, "phase_type", "sum to 1"),
        ((np.array([1.5, -0.5]), ERLANG2[1]), None, "phase_type", "non-negative"),
        ((np.array([1.0]), ERLANG2[1]), None, "phase_type", "square"),
        ((START, POSITIVE_DIAGONAL), None, "phase_type", "diagonal"),
        ((START, NEGATIVE_OFF_DIAGONAL), None, "phase_type", "off-diagonal"),
        ((START, POSITIVE_ROW_SUM), None, "phase_type", "sum to <= 0"),
        ((START, TRAPPED), None, "phase_type", "absorption"),
        ((np.array([1.0]),), None, "phase_type", "pair"),
    ],
)
def test_phase_type_rejections(
    phase_type: Any, service_rate: float | None, parameter: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason) as info:
        call(service_rate=service_rate, phase_type=phase_type)
    assert info.value.parameter == parameter  # type: ignore[attr-defined]


def test_loss_probability_validates_too() -> None:
    with pytest.raises(ValueError, match="capacity: must be at least the batch size"):
        loss_probability(5e4, MU, 5, 6)
    with pytest.raises(ValueError, match="batch: must be an integer"):
        loss_probability(5e4, MU, 64, 6.5)
    with pytest.raises(ValueError, match="arrival_rate: must be strictly positive"):
        loss_probability(-5e4, MU, 64, 6)
    with pytest.raises(ValueError, match="service_rate: must be strictly positive"):
        loss_probability(5e4, 0.0, 64, 6)


def test_integral_floats_and_numpy_integers_are_accepted() -> None:
    a = bulk_service_queue(5e4, MU, 64.0, np.int64(6))
    b = bulk_service_queue(5e4, MU, 64, 6)
    np.testing.assert_array_equal(a.loss_probability, b.loss_probability)
