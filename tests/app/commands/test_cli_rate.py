"""``blastrate rate``: the library's answer, one-line errors with their exit status."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import RATE, blastrate, invoke
from fastapi.testclient import TestClient

import transport
from app.commands.common import (
    EXIT_INTERNAL,
    EXIT_MODEL,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    error_from_problem,
)
from host import Workload, host_profile


def test_rate_prints_a_summary() -> None:
    result = invoke("rate", *RATE)
    assert result.exit_code == EXIT_OK, result.stderr
    assert "effective bottleneck rate" in result.stdout
    # The time-slice model by default; on the paper's 2007 host it sends at the line rate.
    assert "model                          timeslice (lag)" in result.stdout
    assert "limited by the line rate" in result.stdout
    paper = invoke("rate", *RATE, "--model", "paper")
    assert "limited by the end system" in paper.stdout
    assert "paper (processor sharing, stationary loss)" in paper.stdout


def test_rate_json_is_the_library_answer() -> None:
    result = invoke("rate", *RATE, "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    body = json.loads(result.stdout)
    # Independent path: the transport library called directly, not through the app.  The
    # default model, the time-slice one, with a built-in profile's (no) calibration.
    profile = host_profile("sx280-2007")
    expected = transport.time_slice_bottleneck_rate(
        Workload(2, 1),
        profile,
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
        settle_s=transport.DEFAULT_SETTLE_S,
        **transport.time_slice_costs(None, profile).to_dict(),
    )
    assert body["effective_bottleneck_rate_bps"] == expected.rate_bps
    assert body["inputs"]["model"] == "timeslice"
    assert body["inputs"]["transfer"] == {
        "file_size_bytes": 500_000_000,
        "propagation_delay_s": 0.1,
    }
    paper = json.loads(invoke("rate", *RATE, "--model", "paper", "--json").stdout)
    pipeline = transport.workload_bottleneck_rate(
        Workload(2, 1), file_size_bytes=500_000_000, propagation_delay_s=0.1
    )
    assert paper["effective_bottleneck_rate_bps"] == pipeline.bottleneck.rate_bps


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--file-size", "lots"], "--file-size"),
        (["--line-rate", "1gbps"], "--line-rate"),  # case matters: refused
        (["--coalesce-packets", "999"], "--coalesce-packets"),
        (["--profile", "nope"], "--profile"),
        (["--cores", "x"], "--cores"),
        (["--nic-service", "magic"], "--nic-service"),
        (["--timeout", "0"], "--timeout"),
        # Fixed bounds of the model's domain: bad input (exit 2, as from a server), named
        # by the option, not by the limit (it was "max_cores: ...", exit 3).
        (["--cores", "999"], "--cores"),
        (["-I", "1001"], "--io-tasks"),
        # Python's float takes these; no bound gives the right reason.
        (["--mu-net", "nan"], "--mu-net"),
        (["--mu-disk", "inf"], "--mu-disk"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(extra: list[str], option: str) -> None:
    result = invoke("rate", *RATE, *extra)
    assert result.exit_code == EXIT_USAGE
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"blastrate: error: {option}:")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rate", "-C", "2"], "blastrate: error: --io-tasks: required"),
        (["frobnicate"], "blastrate: error: No such command 'frobnicate'."),
        (["rate", *RATE, "--bogus"], "blastrate: error: --bogus: no such option"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str) -> None:
    result = invoke(*argv)
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.strip() == message


def test_no_command_shows_help_and_exits_2() -> None:
    result = invoke()
    assert result.exit_code == EXIT_USAGE
    assert "Commands:" in result.stderr


def test_max_states_names_the_option_that_raises_it() -> None:
    # I = 20 on d = 2 disks: (I+1)(I+2)/2 = 231 placements of the I/O tasks.
    result = invoke("rate", *RATE[:2], "-I", "20", *RATE[4:], "--disks", "2", "--max-states", "10")
    assert result.exit_code == EXIT_MODEL
    assert result.stderr.startswith("blastrate: error: --max-states:")
    assert "raise it with --max-states" in result.stderr


def test_unreachable_server_exits_4(unused_port: int) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    result = invoke("rate", *RATE, "--server", url, "--timeout", "2")
    assert result.exit_code == EXIT_UNREACHABLE
    assert "cannot reach server" in result.stderr


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == EXIT_OK
    assert result.stdout.startswith("blastrate ")


@pytest.mark.parametrize(
    ("workload", "option"),
    [
        ({"cpu_tasks": 2, "io_tasks": 1, "cores": 999}, "--cores"),
        ({"cpu_tasks": 2, "io_tasks": 1, "cores": 0}, "--cores"),
        ({"cpu_tasks": 2, "io_tasks": 1001}, "--io-tasks"),
    ],
)
def test_a_servers_schema_bound_names_the_option(
    client: TestClient, workload: dict[str, int], option: str
) -> None:
    # With --server the same bad input came back as "maximum: 1 invalid field(s): ...":
    # the schema keyword taken for a limit to raise.  It is the option, exit 2, as locally.
    response = client.post(
        "/bottleneck-rate",
        json={
            "workload": workload,
            "transfer": {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1},
        },
    )
    assert response.status_code == 422
    error = error_from_problem(response.json(), 422, local=False)
    assert error.exit_code == EXIT_USAGE
    assert error.message.startswith(f"{option}: Input should be")


def test_max_states_with_a_server_is_refused_not_dropped(unused_port: int) -> None:
    # It bounds a local run only; with --server it was ignored without a word.
    url = f"http://127.0.0.1:{unused_port}"
    result = invoke("rate", *RATE, "--server", url, "--max-states", "10")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("blastrate: error: --max-states: bounds a local")


@pytest.mark.parametrize("command", ["rate", "curve", "sweep", "what-if"])
def test_one_vocabulary_on_every_command(command: str) -> None:
    """-C/--cpu-tasks, -I/--io-tasks and --delay/--propagation-delay mean the same on
    rate, curve, sweep and what-if (before: sweep and what-if took only the long names,
    rate and curve only --delay)."""
    extra = {"curve": ["--points", "5"], "what-if": []}.get(command, [])
    for names in (
        ["-C", "1", "-I", "0", "--delay", "100ms"],
        ["--cpu-tasks", "1", "--io-tasks", "0", "--propagation-delay", "100ms"],
    ):
        r = invoke(command, *names, "--file-size", "500MB", *extra)
        assert r.exit_code == 0, (names, r.stderr)


@pytest.mark.parametrize("command", ["rate", "sweep"])
def test_a_bare_delay_is_refused_and_iperf3_spellings_are_read(command: str) -> None:
    """Before: --delay 100 meant 100 s, and 800M and 100msec were refused."""
    r = invoke(command, "-C", "1", "-I", "0", "--file-size", "500MB", "--delay", "100")
    assert r.exit_code == 2
    assert r.stderr.startswith("blastrate: error: --delay: a bare number is ambiguous")
    r = invoke(
        command,
        "-C",
        "1",
        "-I",
        "0",
        "--file-size",
        "500MB",
        "--delay",
        "100msec",
        "--line-rate",
        "800M",
    )
    assert r.exit_code == 0, r.stderr


def test_rate_uses_this_hosts_default_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Issue #21: with no --profile, the profile `blastrate calibrate` made the default.
    from host import host_profile
    from host.store import ProfileStore

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("BLASTRATE_DATABASE_URL", url)
    store = ProfileStore(url)
    store.put(host_profile("sx280-2007").replace(name="lab-2", mu_net=20_000.0))
    store.set_default("lab-2")
    body = json.loads(invoke("rate", *RATE, "--json").stdout)
    assert (body["inputs"]["host"]["profile"], body["inputs"]["host"]["mu_net"]) == (
        "lab-2",
        20_000.0,
    )
    named = json.loads(invoke("rate", *RATE, "--profile", "sx280-2007", "--json").stdout)
    assert named["inputs"]["host"]["profile"] == "sx280-2007"


def test_an_unusable_profile_database_is_one_line_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With no --profile, rate reads the host default from the database; a database it
    # cannot open was an "internal error: ProfileStoreError" naming nothing to change.
    monkeypatch.setenv("BLASTRATE_DATABASE_URL", "sqlite:////nonexistent-dir/for/sure/p.db")
    result = invoke("rate", *RATE)
    assert result.exit_code == EXIT_INTERNAL
    assert "BLASTRATE_DATABASE_URL" in result.stderr and "--profile" in result.stderr
    assert "internal error" not in result.stderr
    named = invoke("rate", *RATE, "--profile", "sx280-2007")
    assert named.exit_code == EXIT_OK, named.stderr


def test_rate_model_timeslice_uses_the_default_profiles_calibration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Issue #21: --model timeslice computes what `send --rate auto` would, from the host
    # default's calibrated slice and costs; reference: the library called directly.
    from host import host_profile
    from host.store import ProfileStore

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("BLASTRATE_DATABASE_URL", url)
    store = ProfileStore(url)
    lab = host_profile("sx280-2007").replace(name="lab-3", mu_net=12_000.0, buffer_packets=92)
    calibration = {"time_slice_s": 0.004, "kernel_s_per_datagram": 5e-6, "wakeup_s": 1e-5}
    store.put(lab, provenance=calibration)
    store.set_default("lab-3")
    argv = ["-C", "2", "-I", "0", "--file-size", "20MB", "--delay", "10ms"]
    result = invoke("rate", *argv, "--model", "timeslice", "--json")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    expected = transport.time_slice_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0),
        lab,
        file_size_bytes=20_000_000,
        propagation_delay_s=0.01,
        settle_s=transport.DEFAULT_SETTLE_S,
        **calibration,
    )
    assert body["effective_bottleneck_rate_bps"] == expected.rate_bps
    assert body["loss_probability"] == expected.first_round_loss
    assert body["inputs"]["model"] == "timeslice"
    assert body["inputs"]["time_slice"]["time_slice_s"] == 0.004
    text = invoke("rate", *argv, "--model", "timeslice").stdout
    assert "timeslice (lag): slice 4 ms" in text and "(first blast)" in text
    assert "competitors C (processor sharing)" in text
    # A measured share, where a calibration gave one, is named on the model line too.
    store.put(
        lab.replace(name="lab-4"),
        provenance={
            **calibration,
            "effective_competitors": [0.9, 1.6],
            "competitors_cost": "per_read",
        },
    )
    shared = invoke("rate", *argv, "--model", "timeslice", "--profile", "lab-4").stdout
    assert "measured competitors 0.9, 1.6" in shared
    # A table stored without the receiver cost it was solved under predates that cost
    # (transport.time_slice_costs): not used, and the model line says so.
    store.put(
        lab.replace(name="lab-5"),
        provenance={**calibration, "effective_competitors": [0.9, 1.6]},
    )
    older = invoke("rate", *argv, "--model", "timeslice", "--profile", "lab-5").stdout
    assert "competitors C (processor sharing)" in older
    paper = json.loads(invoke("rate", *argv, "--model", "paper", "--json").stdout)
    assert paper["inputs"]["model"] == "paper" and "time_slice" not in paper["inputs"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--nic-service", "phase-type"], "--nic-service: the time-slice model (the default"),
        (["--buffer-packets", "5000", "--coalesce-packets", "64"], "--buffer-packets: K=5000"),
    ],
)
def test_rate_model_timeslice_refusals_name_the_option(extra: list[str], message: str) -> None:
    # Named or by default, the same refusal.
    for model in (["--model", "timeslice"], []):
        result = invoke("rate", *RATE, "--profile", "sx280-2007", *model, *extra)
        assert result.exit_code in (EXIT_USAGE, EXIT_MODEL), result.stderr
        assert result.stderr.startswith(f"blastrate: error: {message}")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--delay", "1e300s"], "--delay"),  # answered 2.054e+300 s locally before
        (["--delay", "100ms", "-C", "5000"], "--cpu-tasks"),
    ],
)
def test_a_local_answer_keeps_the_services_limits(argv: list[str], option: str) -> None:
    # Issue #37: the same input gets the same answer with and without --server: the
    # service's bounds (app.schemas.bodies) apply to a local computation too.
    base = ["-C", "2", "-I", "1", "--file-size", "500MB", "--delay", "100ms"]
    r = invoke("rate", *base, *argv)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"blastrate: error: {option}: ") and r.stderr.count("\n") == 1


@pytest.mark.parametrize("command", ["rate", "curve", "sweep", "what-if"])
@pytest.mark.parametrize(
    ("option", "value"), [("--delay", "1e300s"), ("--delay", "86401s"), ("--file-size", "1e20")]
)
def test_one_set_of_transfer_limits_on_every_command(command: str, option: str, value: str) -> None:
    """The bounds of GET /bottleneck-rate (a delay in (0, 86,400] s, a file of 1 byte to
    2**53) on every command, local or not.  Before: sweep and what-if took 1e300 s, and
    what-if computed for about 70 s before it answered."""
    given = {"--delay": "100ms", "--file-size": "500MB", option: value}
    extra = {"curve": ["--points", "5"]}.get(command, [])
    r = invoke(command, "-C", "1", "-I", "0", *(x for kv in given.items() for x in kv), *extra)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stderr.startswith("blastrate: error:") and r.stderr.count("\n") == 1, r.stderr
    assert ("delay" if option == "--delay" else "file") in r.stderr.split(":")[2], r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["-C", "2", "-I", "1"],
        ["-C", "3", "-I", "7", "--disks", "3", "--cores", "2"],
        ["-C", "1", "-I", "0", "--buffer-packets", "200", "--coalesce-packets", "7"],
    ],
)
def test_a_one_shot_command_answers_as_the_service_to_the_bit(argv: list[str]) -> None:
    """Issue #37: ``blastrate rate`` in a fresh process runs the NumPy twins of the
    compiled kernels (it does not load Numba); the service runs the compiled ones.
    Reference: the service's computation with the compiled kernels forced."""
    from app.operations.whole_method import compute_bottleneck
    from queues import forced_kernels

    transfer = ["--file-size", "30MB", "--delay", "10ms", "--profile", "sx280-2007"]
    done = subprocess.run(
        [*blastrate(), "rate", *argv, *transfer, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    local = json.loads(done.stdout)
    with forced_kernels(compiled=True):
        served = compute_bottleneck(local["inputs"], {"curve_points": 200})
    assert local == json.loads(json.dumps(served))


@pytest.mark.parametrize(
    ("value", "status", "message"),
    [
        ("2", EXIT_MODEL, "--max-states: the workload's chain has 3 states, more than"),
        ("abc", EXIT_USAGE, "BLASTRATE_MAX_STATES: Input should be a valid integer"),
        ("0", EXIT_USAGE, "BLASTRATE_MAX_STATES: Input should be greater than or equal to 1"),
    ],
)
@pytest.mark.parametrize("name", ["BLASTRATE_MAX_STATES", "blastrate_max_states"])
def test_the_chain_limit_is_read_from_the_environment_as_the_service_reads_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, status: int, message: str
) -> None:
    """Settings (the one parser of BLASTRATE_* variables, case-insensitive) is built only
    when the variable is set; a bad value is one line naming it, exit 2 (it was an
    internal error with a pydantic traceback)."""
    monkeypatch.setenv(name, value)
    r = invoke("rate", *RATE)
    assert r.exit_code == status, r.stderr
    assert r.stderr.startswith(f"blastrate: error: {message}") and r.stderr.count("\n") == 1


def test_a_value_typed_apart_from_its_unit_is_one_line_that_says_so() -> None:
    # Newcomer's trial: "--file-size 500 MB" gave Click's "Got unexpected extra argument
    # (MB)", which said nothing of the cause.
    result = invoke("rate", "-C", "2", "-I", "1", "--file-size", "500", "MB", "--delay", "1ms")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr == (
        "blastrate: error: unexpected argument(s) MB: a value and its unit are one word "
        "(500MB, 100ms, 10Gbps)\n"
    )
