"""POST /sweeps, POST /what-if and GET /plots/*: answers, formats, limits, problems."""

from __future__ import annotations

import csv
import io
from typing import Any

import defusedxml.ElementTree as SafeET

from planning import RESULT_FIELDS, evaluate_point

QUERY = "cpu_tasks=2&io_tasks=1&file_size=500MB&propagation_delay=100ms"
INPUTS = {
    "cpu_tasks": "0..2",
    "io_tasks": [0, 1],
    "file_size": "500MB",
    "propagation_delay": "100ms",
}


def test_sweep_json_records_match_one_call_per_point(client: Any) -> None:
    r = client.post("/sweeps", json={"inputs": INPUTS})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["points"], body["failed"], body["ran_on"]) == (6, 0, "inline")
    assert body["axes"] == {"cpu_tasks": [0, 1, 2], "io_tasks": [0, 1]}
    for rec in body["records"]:
        ref = evaluate_point(
            {k: rec[k] for k in ("cpu_tasks", "io_tasks", "file_size", "propagation_delay")}
        )
        assert rec == ref  # JSON floats read back bit for bit
        assert rec["file_size"] == 500_000_000 and rec["propagation_delay"] == 0.1
    # The records agree with GET /bottleneck-rate for the same point.
    one = client.get(f"/bottleneck-rate?{QUERY}").json()
    rec = next(r for r in body["records"] if (r["cpu_tasks"], r["io_tasks"]) == (2, 1))
    assert rec["effective_bottleneck_rate_bps"] == one["effective_bottleneck_rate_bps"]
    assert rec["transfer_time_s"] == one["transfer_time_s"]


def test_sweep_csv(client: Any) -> None:
    r = client.post("/sweeps", json={"inputs": INPUTS, "format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == 6 and rows[0]["effective_bottleneck_rate_bps"]


def test_sweep_on_the_process_pool(make_client: Any) -> None:
    c = make_client(sweep_inline_points=0, sweep_workers=1)
    r = c.post("/sweeps", json={"inputs": {**INPUTS, "cpu_tasks": "1"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ran_on"] == "processes"
    ref = c.post("/sweeps", json={"inputs": {**INPUTS, "cpu_tasks": "1", "io_tasks": 0}})
    assert body["records"][0] == ref.json()["records"][0]


def test_sweep_limit_is_named(make_client: Any, problem_of: Any) -> None:
    c = make_client(sweep_max_points=5)
    body = problem_of(c.post("/sweeps", json={"inputs": INPUTS}), 422)
    (err,) = body["errors"]
    assert (err["field"], err["limit"], err["allowed"], err["actual"]) == (
        "body.inputs",
        "sweep_max_points",
        5,
        6,
    )


def test_sweep_bad_inputs_are_named(client: Any, problem_of: Any) -> None:
    body = problem_of(client.post("/sweeps", json={"inputs": {**INPUTS, "file_size": "5XB"}}), 422)
    assert body["errors"][0]["field"] == "body.inputs.file_size"
    body = problem_of(client.post("/sweeps", json={"inputs": {**INPUTS, "cores": "4..1"}}), 422)
    assert body["errors"][0]["field"] == "body.inputs.cores"
    body = problem_of(
        client.post("/sweeps", json={"inputs": {**INPUTS, "buffer_packets": "64,100000"}}), 422
    )
    assert body["errors"][0]["limit"] == "planning_max_buffer_packets"
    body = problem_of(client.post("/sweeps", json={"inputs": {"io_tasks": 1}}), 422)
    assert any(e["field"].endswith("cpu_tasks") for e in body["errors"])
    # Missing for every point: one problem naming it.  (POST /sweeps's schema requires it;
    # the plots read a query, and drew a plot of failed points before.)
    for path in ("/plots/bottleneck-rate-grid?cpu_tasks=0..2", "/plots/sweep?cpu_tasks=0..2"):
        body = problem_of(client.get(f"{path}&io_tasks=0,1&file_size=1MB"), 422)
        assert [e["field"] for e in body["errors"]] == ["query.propagation_delay"]
    # A profile the planning library cannot know (unknown, or stored on this host) was a
    # failed point per row; it is one problem that says what to do.
    for name in ("nosuch", "sx280-2007,nosuch"):
        body = problem_of(client.post("/sweeps", json={"inputs": {**INPUTS, "profile": name}}), 422)
        assert body["errors"][0]["field"] == "body.inputs.profile"
        assert "built-in profiles only" in body["errors"][0]["reason"]


def test_sweep_on_an_unreachable_cluster_is_503(make_client: Any, problem_of: Any) -> None:
    c = make_client(
        sweep_inline_points=0, sweep_cluster="tcp://127.0.0.1:9", sweep_connect_timeout_s=1
    )
    r = c.post("/sweeps", json={"inputs": INPUTS})
    body = problem_of(r, 503)
    assert "Retry-After" in r.headers and body["errors"][0]["field"] == "sweep_cluster"


def test_what_if(client: Any) -> None:
    payload = {
        "inputs": {
            "cpu_tasks": 2,
            "io_tasks": 1,
            "file_size": "500MB",
            "propagation_delay": "100ms",
        },
        "max_buffer_packets": 256,
    }
    r = client.post("/what-if", json=payload)
    assert r.status_code == 200, r.text
    body = r.json()
    saved = [c["time_saved_s"] for c in body["changes"]]
    assert saved == sorted(saved, reverse=True)
    assert body["best_ring"]["commands"][0].startswith("ethtool -G eth0 rx ")
    assert {e["parameter"] for e in body["elasticities"]} >= {"mu_net", "line_rate"}
    assert client.post("/what-if", json=payload).headers["x-cache"] == "hit"


def test_what_if_limits(client: Any, problem_of: Any) -> None:
    base = {"cpu_tasks": 2, "io_tasks": 1, "file_size": "500MB", "propagation_delay": "1s"}
    body = problem_of(
        client.post("/what-if", json={"inputs": base, "max_buffer_packets": 10**6}), 422
    )
    assert body["errors"][0]["limit"] == "planning_max_buffer_packets"
    body = problem_of(client.post("/what-if", json={"inputs": {**base, "cores": "1,2"}}), 422)
    assert body["errors"][0]["field"] == "body.inputs.cores"
    body = problem_of(client.post("/what-if", json={"inputs": base, "interface": "a b"}), 422)
    assert "interface" in body["errors"][0]["field"]


def _svg(response: Any) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    return SafeET.fromstring(response.content)


def test_plots_are_svg_with_the_optimum(client: Any) -> None:
    root = _svg(client.get(f"/plots/transfer-time?{QUERY}"))
    assert any(e.get("id") == "optimum" for e in root.iter())
    assert any(e.get("id") == "optimum" for e in _svg(client.get(f"/plots/loss?{QUERY}")).iter())
    _svg(client.get("/plots/service-time-cdf?cpu_tasks=2&io_tasks=1"))
    _svg(
        client.get(
            "/plots/bottleneck-rate-grid?cpu_tasks=0..3&io_tasks=0,1"
            "&file_size=500MB&propagation_delay=100ms"
        )
    )
    _svg(
        client.get(
            "/plots/sweep?cpu_tasks=2&io_tasks=0..3&cores=1,2"
            "&file_size=500MB&propagation_delay=100ms&y=transfer_time_s"
        )
    )


def test_plot_png_cache_and_etag(client: Any) -> None:
    url = f"/plots/transfer-time?{QUERY}&format=png"
    first = client.get(url)
    assert first.headers["content-type"] == "image/png"
    assert first.content[:8] == b"\x89PNG\r\n\x1a\n"
    again = client.get(url)
    assert again.content == first.content
    assert client.get(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 304


def test_plot_problems(make_client: Any, problem_of: Any) -> None:
    c = make_client(plot_max_points=10)
    body = problem_of(
        c.get(
            "/plots/bottleneck-rate-grid?file_size=1MB&propagation_delay=1s"
            "&cpu_tasks=0..8&io_tasks=0,1"
        ),
        422,
    )
    assert body["errors"][0]["limit"] == "plot_max_points"
    body = problem_of(c.get(f"/plots/transfer-time?{QUERY}&format=gif"), 422)
    assert body["errors"][0]["field"] == "query.format"
    body = problem_of(
        c.get("/plots/transfer-time?cpu_tasks=0..2&io_tasks=1&file_size=1MB&propagation_delay=1s"),
        422,
    )
    assert body["errors"][0]["field"] == "query.cpu_tasks"


def test_page_and_assets(client: Any) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "/static/app.js" in r.text and "http" not in r.text.split("<body>")[0].replace(
        "http-equiv", ""
    )
    assert client.get("/static/style.css").status_code == 200
    assert client.get("/static/secret.txt").status_code == 404


def test_the_grid_plot_given_one_point_draws_the_grid_around_it(client: Any) -> None:
    """Before: /plots/bottleneck-rate-grid given GET /bottleneck-rate's query
    (cpu_tasks=2&io_tasks=1) collapsed to one point."""

    def lines(query: str) -> list[int]:
        root = _svg(client.get(f"/plots/bottleneck-rate-grid?{query}"))
        # One marker path per point: count the points of each line's polyline.
        return sorted(
            len(e.get("d", "").split(" L "))
            for e in root.iter()
            if e.get("d", "").count(" L ") >= 1
        )

    point = lines(f"{QUERY}")
    grid = lines("cpu_tasks=0..8&io_tasks=0,1,2,4&file_size=500MB&propagation_delay=100ms")
    assert point == grid and max(point) >= 9


def test_a_sweep_over_both_models_agrees_with_bottleneck_rate(client: Any) -> None:
    # Issue #39 §4: model= on the sweeps.  Reference: GET /bottleneck-rate with the same
    # point and model, a separate path (app.operations.whole_method, the profile's
    # provenance read from the store) that must give the same numbers bit for bit.
    inputs = {
        "cpu_tasks": "1,2",
        "io_tasks": 0,
        "file_size": "20MB",
        "propagation_delay": "10ms",
        "model": "paper,timeslice",
    }
    r = client.post("/sweeps", json={"inputs": inputs})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["points"], body["failed"]) == (4, 0)
    assert body["axes"]["model"] == ["paper", "timeslice"]
    for rec in body["records"]:
        one = client.get(
            "/bottleneck-rate",
            params={
                "cpu_tasks": rec["cpu_tasks"],
                "io_tasks": 0,
                "file_size": "20MB",
                "propagation_delay": "10ms",
                "profile": "sx280-2007",
                "model": rec["model"],
            },
        ).json()
        for field in RESULT_FIELDS:
            if field != "error":  # a record's own field; /bottleneck-rate answers or refuses
                assert rec[field] == one[field], (rec["model"], field)
    by_model = {
        m: [r["effective_bottleneck_rate_bps"] for r in body["records"] if r["model"] == m]
        for m in ("paper", "timeslice")
    }
    assert by_model["paper"] != by_model["timeslice"]  # two models, not one twice


def test_the_time_slice_model_is_bounded_on_the_planning_routes(
    client: Any, problem_of: Any
) -> None:
    base = {"cpu_tasks": 2, "io_tasks": 0, "file_size": "20MB", "propagation_delay": "10ms"}
    # A K and N beyond transport.MAX_TIME_SLICE_WORK: that point's record says why.
    big = {**base, "model": "timeslice", "buffer_packets": 4096, "coalesce_packets": 64}
    r = client.post("/sweeps", json={"inputs": big})
    assert r.status_code == 200, r.text
    record = r.json()["records"][0]
    assert record["effective_bottleneck_rate_bps"] is None
    assert record["error"].startswith("buffer_packets: ") and "model=paper" in record["error"]
    assert "max_advice_work" in record["error"] or "operations per rate" in record["error"]
    # What-if ranks with the paper's model unless told otherwise; told the time-slice
    # model, it refuses, naming the field.
    body = problem_of(client.post("/what-if", json={"inputs": {**base, "model": "timeslice"}}), 422)
    assert body["errors"][0]["field"].endswith("model")
    ranked = client.post("/what-if", json={"inputs": base, "max_buffer_packets": 128})
    assert ranked.status_code == 200, ranked.text
    assert ranked.json()["baseline"]["model"] == "paper"
    # The plots draw the time-slice model (the default) ...
    plot = client.get("/plots/transfer-time", params=base)
    assert plot.status_code == 200, plot.text
    assert "time-slice model" in plot.text
    # ... bounded in work: ten points at K = 1,736 (4.5e6 each) exceed 4e7.
    heavy = {**base, "cpu_tasks": "0..9", "buffer_packets": 1736}
    body = problem_of(client.get("/plots/sweep", params={**heavy, "x": "cpu_tasks"}), 422)
    assert body["errors"][0]["limit"] == "planning_max_time_slice_work"
    assert body["errors"][0]["actual"] > body["errors"][0]["allowed"] == 4e7
    # An unknown model is refused, naming the field.
    body = problem_of(client.post("/sweeps", json={"inputs": {**base, "model": "magic"}}), 422)
    assert body["errors"][0]["field"].endswith("model")


def test_the_time_slice_work_of_a_plot_counts_what_its_points_use() -> None:
    """Closed form: points x (K (7 (N + 1))^2 + 3e5) for the largest K and N a point uses;
    a K given overrides the profile's (review: buffer_packets=8 was costed as the
    profile's 64); the paper's points cost nothing here."""
    from app.operations.capacity import TIME_SLICE_POINT_WORK, time_slice_points_work

    def cost(points: int, k: int, n: int) -> float:
        return points * (k * (7 * (n + 1)) ** 2 + TIME_SLICE_POINT_WORK)

    base = {"cpu_tasks": 2, "io_tasks": 0}
    assert time_slice_points_work(base, {"cpu_tasks": [0, 1, 2]}) == cost(3, 64, 6)
    assert time_slice_points_work({**base, "buffer_packets": 8}, {}) == cost(1, 8, 6)
    axes = {"buffer_packets": [16, 128], "coalesce_packets": [2, 4]}
    assert time_slice_points_work(base, axes) == cost(4, 128, 4)
    assert time_slice_points_work({**base, "model": "paper"}, axes) == 0.0
    # Half the points in each model: half the time-slice work.
    both = {**axes, "model": ["paper", "timeslice"]}
    assert time_slice_points_work(base, both) == cost(4, 128, 4)
