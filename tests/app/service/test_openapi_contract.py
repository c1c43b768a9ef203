"""The committed API contract, openapi/openapi.json, is what the app serves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.service.contract import CONTRACT_PATH, main, openapi_document, render

REQUEST_BODIES = {
    "compute_bottleneck_rate",
    "compute_service_time",
    "solve_nic_queue",
    "compute_transfer_time",
    "solve_srn",
    "put_profile",
    "submit_srn_job",
    "run_sweep",
    "what_if",
}


def test_app_schema_matches_the_committed_file() -> None:
    committed = json.loads(CONTRACT_PATH.read_text())
    current = openapi_document()
    assert current == committed, (
        "openapi/openapi.json is stale: run scripts/openapi and commit the result"
    )
    assert render(current) == CONTRACT_PATH.read_text()


def operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for path in document["paths"].values() for op in path.values()]


def test_operation_ids_are_stable_and_unique() -> None:
    ids = [op["operationId"] for op in operations(openapi_document())]
    assert len(ids) == len(set(ids))
    assert set(ids) == {
        "get_bottleneck_rate",
        "compute_bottleneck_rate",
        "compute_service_time",
        "list_profiles",
        "get_profile",
        "put_profile",
        "delete_profile",
        "probe_host",
        "solve_nic_queue",
        "compute_transfer_time",
        "solve_srn",
        "submit_srn_job",
        "get_srn_job",
        "cancel_srn_job",
        "get_health",
        "get_readiness",
        "get_metrics",
        "get_problem_type",
        "run_sweep",
        "what_if",
        "plot_transfer_time",
        "plot_loss",
        "plot_service_time_cdf",
        "plot_bottleneck_rate_grid",
        "plot_sweep",
    }


def test_every_request_model_has_an_example() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    for op in operations(document):
        body = op.get("requestBody")
        if body is None:
            continue
        assert op["operationId"] in REQUEST_BODIES
        ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        assert schemas[ref].get("examples"), f"{ref} has no example"


def test_errors_are_documented_as_problem_json() -> None:
    for op in operations(openapi_document()):
        for status, response in op["responses"].items():
            if status[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], (
                    op["operationId"],
                    status,
                )
                assert response["content"]["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"
                }


def test_contract_command_checks_and_never_takes_an_option_for_a_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `python -m app.service.contract --help` once wrote the spec to a file named "--help".
    assert main(["--check"]) == 0
    stale = tmp_path / "openapi.json"
    stale.write_text(CONTRACT_PATH.read_text().replace('"title"', '"titel"', 1))
    assert main([str(stale), "--check"]) == 1
    assert "differs" in capsys.readouterr().out
    with pytest.raises(SystemExit) as shown:
        main(["--help"])
    assert shown.value.code == 0
    assert not Path("--help").exists()
