"""HTTP connections a client cannot hoard: a cap per client and in all, and a bound on
the time to send a whole request.

uvicorn closes a keep-alive connection that stays idle between requests, but not one
that never finishes its first request: 20,000 idle, half-sent requests once used up the
process's file limit, and ``/healthz`` failed for 35 s.  :class:`BoundedHttpProtocol`
(``blastrate serve`` runs uvicorn with it) adds what is missing:

- a connection beyond ``max_connections`` in all, or beyond
  ``max_connections_per_client`` from one address, is closed as soon as it is accepted;
- a request whose headers and body have not all arrived ``read_timeout_s`` after its
  first byte (or after the connection opened) is dropped with its connection.

The limits are :class:`app.Settings` fields (``BLASTRATE_MAX_CONNECTIONS``, ...).
"""

from __future__ import annotations

import asyncio
import functools
import resource
from collections import Counter
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.settings import Settings

__all__ = ["BoundedHttpProtocol", "raise_file_limit"]


@functools.cache
def _limits() -> tuple[int, int, float]:
    s = Settings()
    return s.max_connections, s.max_connections_per_client, s.read_timeout_s


def raise_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; the new limit.

    Each connection holds a file descriptor; the soft limit (often 1,024) would bind
    before ``max_connections`` does.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with connection caps and a request read timeout."""

    # Per worker process: connections open now, by client address.
    _per_client: ClassVar[Counter[str]] = Counter()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._read_timer: asyncio.TimerHandle | None = None
        self._counted: str | None = None
        most, per_client, _ = _limits()
        address = self.client[0] if self.client else ""
        if len(self.connections) > most or self._per_client[address] >= per_client:
            transport.abort()  # frees the descriptor now; connection_lost follows
            return
        self._per_client[address] += 1
        self._counted = address
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        address = getattr(self, "_counted", None)
        if address is not None:
            left = self._per_client[address] - 1
            if left > 0:
                self._per_client[address] = left
            else:
                del self._per_client[address]
            self._counted = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._read_timer is None:  # the next request on a kept-alive connection
            self._arm()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(_limits()[2], self._read_timed_out)

    def _disarm(self) -> None:
        timer: Any = getattr(self, "_read_timer", None)
        if timer is not None:
            timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if not self.transport.is_closing():
            self.transport.abort()
