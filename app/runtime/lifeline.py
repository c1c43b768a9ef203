"""Worker processes end when the server that started them ends, even by ``kill -9``.

A solver or job process comes from the ``forkserver``, so its parent is the fork server,
not the server, and ``PR_SET_PDEATHSIG`` would watch the wrong process (and, set in the
server, the thread that happened to start the fork server).  Instead each worker watches
the server's process itself: a ``pidfd`` (Linux 5.3+) becomes readable when that process
ends, and a daemon thread blocked on it ends the worker at once.  With every worker gone,
the fork server and multiprocessing's resource tracker see their pipes close and end too.
"""

from __future__ import annotations

import os
import select
import threading

__all__ = ["ORPHANED_EXIT", "end_with", "pid_exists"]

#: Exit status of a worker whose server is gone.
ORPHANED_EXIT = 70


def end_with(server_pid: int, poll_s: float = 0.5) -> None:
    """End this process as soon as process ``server_pid`` ends.

    Parameters
    ----------
    server_pid : int
        The server's process id, taken in the server (``os.getpid()``) before this
        process was started.
    poll_s : float, default 0.5
        Where ``pidfd_open`` is unavailable: how often to check that the server still
        exists (s).
    """
    try:
        fd = os.pidfd_open(server_pid)
    except (AttributeError, OSError):
        fd = -1
    if fd < 0 and not pid_exists(server_pid):
        os._exit(ORPHANED_EXIT)

    def watch() -> None:
        if fd >= 0:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll()  # readable once the process has ended
        else:
            stop = threading.Event()
            while pid_exists(server_pid):
                stop.wait(poll_s)
        # No cleanup to do: the server that would read the result is gone.
        os._exit(ORPHANED_EXIT)

    threading.Thread(target=watch, name="blastrate-lifeline", daemon=True).start()


def pid_exists(pid: int) -> bool:
    """Whether a process with this id exists (a zombie we own counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
