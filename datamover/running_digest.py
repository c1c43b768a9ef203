"""The SHA-256 of a file being received, computed while its packets arrive.

The receiver checks the whole file's SHA-256 before it gives the file its name.  Hashing
200 MB takes about 0.14 s here (1.4 GB/s), which the user waits for after the last
datagram.  :class:`RunningDigest` hashes the complete prefix of the file in a thread of
its own while the rest is still arriving, so that at the end only what came last is
left to hash.

It runs ahead only where the receive loop need not share its core with it: when the
receiver may run on more than one CPU (``os.sched_getaffinity``), so that the kernel can
put the hashing on a core the receive loop is not using.  A receiver confined to one
core (``taskset -c 0``, as the benchmarks and the validation run it) hashes at the end,
as before: a second runnable thread on its core would take turns with the receive loop
in slices of milliseconds, longer than a default receive buffer holds at 1 Gbit/s
(1.7 ms).
``hashlib`` releases the GIL while it hashes a large buffer, so the receive loop waits
for the thread only between two chunks (and the thread looks for more every 5 ms).

A byte is hashed only once its packet has been stored: :class:`datamover.receive_path.
ReceivePath` marks a packet in the transfer's ``have`` map after its write returns, and
never writes a packet twice.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading

__all__ = ["RunningDigest"]

#: Bytes hashed at a time: large enough that the GIL is taken once per 0.7 ms of
#: hashing, small enough that the end waits for at most one chunk in flight.
CHUNK_BYTES = 1 << 20
#: How often the thread looks for more of the prefix when it has caught up (s).
POLL_S = 0.005


class RunningDigest:
    """SHA-256 of a file whose fixed-size packets arrive in any order.

    Parameters
    ----------
    fd : int
        The file, open for reading, already ``size`` bytes long (its blocks reserved).
    size : int
        File bytes.
    payload_bytes : int
        Bytes per packet: packet ``i`` holds bytes ``i * payload_bytes`` onwards.
    have : bytearray
        One byte per packet, nonzero once the packet is stored (the transfer's map).
    ahead : bool, optional
        Hash the stored prefix in a thread while packets arrive.  Default: when this
        process may run on more than one CPU.

    Attributes
    ----------
    hashed_ahead : int
        Bytes hashed by the thread (before :meth:`finish`, or the chunk it was hashing
        then).
    """

    def __init__(
        self,
        fd: int,
        size: int,
        payload_bytes: int,
        have: bytearray,
        *,
        ahead: bool | None = None,
    ) -> None:
        if size < 0 or payload_bytes < 1:
            raise ValueError("size must be >= 0 and payload_bytes >= 1")
        self.size = size
        self.payload_bytes = payload_bytes
        self.have = have
        self.hashed_ahead = 0
        self._hash = hashlib.sha256()
        self._done = 0  # bytes hashed so far (the stored prefix is at least this long)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._map = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else None
        if ahead is None:
            ahead = len(os.sched_getaffinity(0)) > 1
        if ahead and size > CHUNK_BYTES:
            self._thread = threading.Thread(target=self._run, name="blastrate-digest", daemon=True)
            self._thread.start()

    def _stored_end(self) -> int:
        # End (bytes) of the longest stored prefix, from where hashing has reached.
        first_missing = self.have.find(0, self._done // self.payload_bytes)
        if first_missing < 0:
            return self.size
        return first_missing * self.payload_bytes

    def _hash_to(self, end: int, chunk: int) -> None:
        assert self._map is not None
        with memoryview(self._map) as whole:
            while self._done < end:
                upto = min(end, self._done + chunk)
                with whole[self._done : upto] as part:
                    self._hash.update(part)
                self._done = upto

    def _run(self) -> None:
        while not self._stop.is_set():
            end = self._stored_end()
            if end - self._done >= CHUNK_BYTES:
                # Whole chunks only: the remainder waits for more, or for finish().
                whole = (end - self._done) // CHUNK_BYTES * CHUNK_BYTES
                self._hash_to(self._done + whole, CHUNK_BYTES)
                self.hashed_ahead = self._done
            else:
                self._stop.wait(POLL_S)

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def finish(self) -> str:
        """Hash what is left and return the file's SHA-256 (hex).

        Every packet must have been stored.  Stops the thread first (it finishes the
        chunk it is hashing, at most :data:`CHUNK_BYTES`).
        """
        self._halt()
        self.hashed_ahead = self._done
        if self._map is not None:
            if self._stored_end() != self.size:
                raise ValueError("the file is not complete: a packet is missing")
            self._hash_to(self.size, 1 << 30)
            self._map.close()
            self._map = None
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop without a result (a failed transfer); idempotent."""
        self._halt()
        if self._map is not None:
            self._map.close()
            self._map = None
