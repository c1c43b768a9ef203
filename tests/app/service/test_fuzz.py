"""Schemathesis fuzzes the whole API against the committed contract (bounded examples).

Every generated request, valid or not, must get a response that the contract documents
(status code, content type, body schema), and never a 5xx.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app import Settings, create_app
from app.service.contract import CONTRACT_PATH

APP = create_app(
    Settings(
        warm_up=False,
        log_level="error",
        solve_workers=1,
        # Small chains only: the fuzz is about the contract, not about big models.
        max_states=60,
        inprocess_max_states=30,
        solve_timeout_s=2.0,
        max_rates=200,
        max_curve_points=500,
        max_queue_cells=200_000,
        probe_enabled=False,
        database_url="sqlite://",  # jobs in memory, never in the user's data directory
        # Planning: small sweeps and plots, computed in the request's threads.
        sweep_max_points=12,
        sweep_inline_points=12,
        planning_max_buffer_packets=128,
        plot_max_points=12,
    )
)
schema = schemathesis.openapi.from_path(CONTRACT_PATH)
schema.app = APP

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_contract(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500, response.text
    case.validate_response(response, checks=CHECKS)
