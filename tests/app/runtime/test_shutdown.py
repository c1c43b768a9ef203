"""The bounded shutdown's last resort, ``os._exit``, leaves nothing in the temp directory."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_watchdogs_exit_removes_the_fork_servers_temp_folder() -> None:
    """The fork server's socket lives in a ``pymp-*`` folder that multiprocessing removes
    from an ``atexit`` hook, which ``os._exit`` skips: a server ended by the shutdown
    watchdog left one behind.  The watchdog's exit removes it first.  (A short folder,
    not ``tmp_path``: a socket's path has at most 107 bytes.)"""
    with tempfile.TemporaryDirectory(prefix="shut-") as folder:
        _exit_in(Path(folder))


def _exit_in(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "from multiprocessing import forkserver\n"
        "forkserver.ensure_running()\n"
        "assert [n for n in os.listdir(sys.argv[1]) if n.startswith('pymp-')]\n"
        "from app.runtime.shutdown import _exit_now\n"
        "_exit_now(3)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert list(tmp_path.iterdir()) == []
