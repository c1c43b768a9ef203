"""Start-up work: compile the default nets and the engine's kernels, so that the first
requests are fast and no request's time limit pays for a compile."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import host as host_package
import queues
import srn
import transport
from app.operations.whole_method import compute_bottleneck, resolve_inputs
from host import DEFAULT_PROFILE

__all__ = [
    "CACHED_NETS_S",
    "ENGINE_COMPILE_COMMAND",
    "ENGINE_COMPILE_TIMEOUT_S",
    "PAPER_WORKLOADS",
    "STAMP_NAME",
    "compile_default_nets",
    "kernels_cached",
]

log = logging.getLogger("blastrate.warmup")

#: The paper's experiment: C = 1..4 CPU-bound and I = 0..3 I/O-bound tasks.
PAPER_WORKLOADS = tuple((c, i) for c in range(1, 5) for i in range(4))
#: How long the warm-up waits for the process compiling the engine's kernels (s); past it
#: the process is stopped and the service compiles what is missing itself.
ENGINE_COMPILE_TIMEOUT_S = 120.0
#: Default nets done in less than this (s) were loaded from numba's cache, not compiled:
#: the engine's kernels then load here sooner than the other process could import them,
#: so it is stopped.
CACHED_NETS_S = 6.0
#: What that process runs (``python -c``): the engine's kernels, into numba's disk cache.
ENGINE_COMPILE_COMMAND = "import srn; srn.load_kernels()"
#: The file a completed warm-up leaves (:func:`kernels_cached`).
STAMP_NAME = "blastrate-kernels-loaded.json"


def _compile_engine_kernels_elsewhere() -> subprocess.Popen[bytes] | None:
    """Start compiling the engine's kernels in another process (None if it cannot start).

    With nothing cached the engine's kernels take 13-14 s to compile and the default
    nets about as long.  In two processes the two compiles share the cores; the service
    then loads the engine's kernels from numba's disk cache in about a second.
    """
    try:
        return subprocess.Popen(
            [sys.executable, "-c", ENGINE_COMPILE_COMMAND],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        log.warning("engine kernels compile here", extra={"reason": str(exc)})
        return None


def _wait_for(compiler: subprocess.Popen[bytes] | None, nets_s: float) -> None:
    """Wait for the compiling process, bounded; its failure only costs time here.

    A process still running when this returns (a warm cache, or past the timeout) is
    stopped by the caller.
    """
    if compiler is None or (nets_s < CACHED_NETS_S and compiler.poll() is None):
        return
    try:
        status: int | None = compiler.wait(timeout=ENGINE_COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        status = None
    if status != 0:
        log.warning("engine kernels compile here", extra={"compiler_status": status})


# The built-in profile, named: a net's shape depends on the workload alone, and leaving
# the profile unnamed would read the host default from the profile database, making
# readiness wait on a database that only the profile routes need.
_HOST = {"profile": DEFAULT_PROFILE}
_TRANSFER = {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1}


def _solve_paper_defaults() -> int:
    """Solve the paper's workloads on the built-in profile; the workload shapes (I)."""
    for cpu, io in PAPER_WORKLOADS:
        inputs = resolve_inputs(
            {"cpu_tasks": cpu, "io_tasks": io}, _HOST, _TRANSFER, model="paper"
        ).to_dict()
        compute_bottleneck(inputs, {"curve_points": 200})
    return len({io for _, io in PAPER_WORKLOADS})


def _solve_phase_type_default() -> None:
    """The phase-type NIC runs compiled loops of its own (and stage 1's whole
    distribution): load them now, not on the first request that asks for it."""
    inputs = resolve_inputs(
        {"cpu_tasks": 2, "io_tasks": 1}, _HOST, _TRANSFER, "phase-type", model="paper"
    )
    compute_bottleneck(inputs.to_dict(), {"curve_points": 200})


def _stamp_path() -> Path:
    """Where a completed warm-up notes what it loaded: NUMBA_CACHE_DIR if set (where Numba
    caches), else beside the engine's own cache files."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    return Path(root) if root else Path(str(srn.__file__)).resolve().parent / "__pycache__"


def _sources_stamp() -> str:
    """What Numba's cache of this process's kernels depends on: the versions, and the size
    and modification time of every source file of the packages with kernels (as Numba
    checks its own index against each file's)."""
    # The version from the distribution's metadata: importing Numba here (0.3 s) would put
    # it before readiness, which the paper's default answers do not need.
    from importlib import metadata

    files = {}
    for package in (srn, transport, queues, host_package):
        folder = Path(str(package.__file__)).resolve().parent
        for path in sorted(folder.glob("*.py")):
            info = path.stat()
            files[f"{folder.name}/{path.name}"] = [info.st_size, info.st_mtime_ns]
    return json.dumps(
        {"numba": metadata.version("numba"), "python": sys.version, "files": files}, sort_keys=True
    )


def kernels_cached() -> bool:
    """Whether a warm-up of this very code already loaded every kernel here (the stamp it
    left matches): if so, a kernel loads from Numba's cache, never compiles."""
    try:
        return (_stamp_path() / STAMP_NAME).read_text() == _sources_stamp()
    except OSError:
        return False


def _note_cached() -> None:
    """Leave the stamp; a cache folder that cannot be written only costs the next start
    its early readiness."""
    folder = _stamp_path()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STAMP_NAME).write_text(_sources_stamp())


def compile_default_nets(on_ready: Callable[[int], None] | None = None) -> int:
    """Solve the paper's workloads once on the default profile and load every compiled
    kernel (compiling what is not cached).

    Parameters
    ----------
    on_ready : callable, optional
        Called once, with the nets' count, when the service may answer: right after the
        default answers when
        :func:`kernels_cached` (the kernels then load from the cache after it, and a
        request that needs one meanwhile waits for its load, never a compile), else at
        the end.

    Returns
    -------
    int
        Nets compiled: two (Fig. 1a and Fig. 1b) per workload shape (I, d).
    """
    start = time.perf_counter()
    cached = kernels_cached()
    # Nothing to compile when cached: no second process either.
    compiler = None if cached else _compile_engine_kernels_elsewhere()
    try:
        shapes = _solve_paper_defaults()
        if cached and on_ready is not None:
            on_ready(2 * shapes)
            on_ready = None
        _solve_phase_type_default()
        # The time-slice model, the default answer: its modules (no longer imported with
        # the app) and one answer, so that a first request does not pay for them.
        inputs = resolve_inputs({"cpu_tasks": 2, "io_tasks": 1}, _HOST, _TRANSFER)
        compute_bottleneck(inputs.to_dict(), {"curve_points": 200})
        # The kernels of large chains too (compiled exploration and assembly, the
        # iterative routes, transient and absorption): a first large /srn/solve once
        # paid for their compile out of its own solve_timeout_s, and got 422.  Compiled
        # here, they are in numba's disk cache, where the worker processes load them in
        # milliseconds.  The other process has compiled them meanwhile: here they load
        # from that cache.
        _wait_for(compiler, time.perf_counter() - start)
    finally:
        # Not waited for (a warm cache), past its time, or behind a net that failed: no
        # compiler is left running.
        if compiler is not None and compiler.poll() is None:
            compiler.kill()
            compiler.wait()
    kernels_s = srn.load_kernels()
    # The search's compiled kernels, which every answer here runs from now on (a process
    # without them would answer with their NumPy twins, six times slower).
    kernels_s += transport.load_kernels()
    _note_cached()
    if on_ready is not None:
        on_ready(2 * shapes)
    log.info(
        "default nets compiled",
        extra={
            "nets": 2 * shapes,
            "engine_kernels_s": round(kernels_s, 3),
            "seconds": round(time.perf_counter() - start, 3),
        },
    )
    return 2 * shapes
