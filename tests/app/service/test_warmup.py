"""Start-up work: never waits on the profile database, compiles on both cores, and turns
ready before loading what the cache already holds."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import app.service.warmup as warmup
import srn
from app.service.warmup import compile_default_nets
from host.store import DATABASE_URL_ENV


@pytest.fixture
def cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a first start: no stamp of a completed warm-up, so the engine's kernels are
    compiled in a second process and readiness waits for everything."""
    monkeypatch.setattr(warmup, "kernels_cached", lambda: False)


def test_warm_up_does_not_read_the_profile_database(monkeypatch: pytest.MonkeyPatch) -> None:
    # A request naming no profile reads the host default from the database; the warm-up
    # did the same, so a service whose database could not be opened never became ready,
    # though only its profile routes need the database.
    monkeypatch.setenv(DATABASE_URL_ENV, "sqlite:////nonexistent-dir/for/sure/warm.db")
    assert compile_default_nets() == 8


def test_the_engine_kernels_compile_in_another_process_during_the_warm_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cold: None
) -> None:
    # Issue #24: with nothing cached the engine's kernels took 13-14 s after the default
    # nets' own compile.  They now compile in a second process while the nets do, and
    # the warm-up waits for it before loading them from numba's cache.
    marker = tmp_path / "compiled"
    monkeypatch.setattr(warmup, "CACHED_NETS_S", 0.0)  # as on a first start: wait for it
    loaded_after_child: list[bool] = []
    monkeypatch.setattr(
        warmup, "ENGINE_COMPILE_COMMAND", f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    )
    real_load = srn.load_kernels

    def load() -> float:
        loaded_after_child.append(marker.exists())
        return real_load()

    monkeypatch.setattr(srn, "load_kernels", load)
    assert compile_default_nets() == 8
    assert loaded_after_child == [True]


def test_a_failed_compiler_process_only_costs_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, cold: None
) -> None:
    monkeypatch.setattr(warmup, "CACHED_NETS_S", 0.0)
    monkeypatch.setattr(warmup, "ENGINE_COMPILE_COMMAND", "raise SystemExit(3)")
    loads: list[int] = []
    real_load = srn.load_kernels
    monkeypatch.setattr(srn, "load_kernels", lambda: loads.append(1) or real_load())
    with caplog.at_level(logging.WARNING, logger="blastrate.warmup"):
        assert compile_default_nets() == 8
    assert loads == [1]  # compiled (or loaded) here instead
    said = [r for r in caplog.records if r.getMessage() == "engine kernels compile here"]
    assert [getattr(r, "compiler_status", None) for r in said] == [3]


def test_a_failed_warm_up_leaves_no_compiler_running(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cold: None
) -> None:
    # Found in review: a net that raised left the compiling process running.
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(
        warmup,
        "ENGINE_COMPILE_COMMAND",
        f"import os, pathlib, time; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()));"
        " time.sleep(600)",
    )

    def failing(*_: object, **__: object) -> None:
        deadline = time.monotonic() + 60
        # Until the compiler has said who it is: the file exists a moment before its
        # text does (an empty read failed once in CI).
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("a net failed")

    monkeypatch.setattr(warmup, "compute_bottleneck", failing)
    with pytest.raises(RuntimeError, match="a net failed"):
        compile_default_nets()
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)


def test_with_a_warm_cache_the_compiler_process_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cold: None
) -> None:
    # Nets that load from numba's cache mean the engine's kernels do too: the process
    # (here one that would take ten minutes) is stopped rather than waited for.
    monkeypatch.setattr(warmup, "CACHED_NETS_S", float("inf"))
    monkeypatch.setattr(warmup, "ENGINE_COMPILE_COMMAND", "import time; time.sleep(600)")
    loads: list[int] = []
    real_load = srn.load_kernels
    monkeypatch.setattr(srn, "load_kernels", lambda: loads.append(1) or real_load())
    assert compile_default_nets() == 8
    assert loads == [1]


def test_a_stamp_of_this_code_says_the_kernels_are_cached(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # where the stamp goes
    assert not warmup.kernels_cached()
    warmup._note_cached()
    assert (tmp_path / warmup.STAMP_NAME).exists() and warmup.kernels_cached()
    # Any source with kernels edited (Numba would recompile it): not cached any more.
    real = warmup._sources_stamp
    monkeypatch.setattr(warmup, "_sources_stamp", lambda: real().replace("}", ", 1}", 1))
    assert not warmup.kernels_cached()


def test_with_the_kernels_cached_it_is_ready_before_loading_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ready after the default answers; the kernels then load from the cache, and no
    second process is started to compile them."""
    events: list[str] = []
    monkeypatch.setattr(warmup, "kernels_cached", lambda: True)
    monkeypatch.setattr(
        warmup, "_compile_engine_kernels_elsewhere", lambda: events.append("compiler")
    )
    real_load = srn.load_kernels
    monkeypatch.setattr(srn, "load_kernels", lambda: events.append("engine") or real_load())
    assert compile_default_nets(lambda nets: events.append(f"ready {nets}")) == 8
    assert events == ["ready 8", "engine"]


def test_without_the_stamp_it_is_ready_only_after_loading_them(
    monkeypatch: pytest.MonkeyPatch, cold: None
) -> None:
    events: list[str] = []
    monkeypatch.setattr(warmup, "ENGINE_COMPILE_COMMAND", "pass")
    real_load = srn.load_kernels
    monkeypatch.setattr(srn, "load_kernels", lambda: events.append("engine") or real_load())
    assert compile_default_nets(lambda nets: events.append(f"ready {nets}")) == 8
    assert events == ["engine", "ready 8"]


def test_the_app_and_the_cache_check_load_neither_numba_nor_the_time_slice_model() -> None:
    """A warm restart is ready once the paper's default answers are warm: importing the
    app and checking the kernels' stamp must not load Numba (0.3 s), the time-slice
    model or SciPy's sparse matrices; the warm-up loads them after readiness."""
    script = (
        "import json, sys\n"
        "import app.main\n"
        "from app.service import warmup\n"
        "warmup.kernels_cached()\n"
        "warmup._sources_stamp()  # what kernels_cached reads when a stamp exists\n"
        "heavy = ('numba', 'llvmlite', 'transport.timeslice', 'scipy.sparse')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
