"""The SHA-256 computed while a file arrives (datamover.running_digest).

Reference: ``hashlib.sha256`` over the file's bytes in one piece (the digest the sender
sends).  The thread must never hash a byte before its packet is stored: a file written
in a random order while the thread runs must still give the reference digest.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datamover.running_digest import CHUNK_BYTES, RunningDigest

PAYLOAD = 1000


@pytest.fixture
def fd() -> Iterator[int]:
    f = os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
    yield f
    os.close(f)


def _file(fd: int, size: int) -> tuple[bytes, bytearray]:
    os.ftruncate(fd, 0)
    if size:
        os.posix_fallocate(fd, 0, size)
    return os.urandom(size), bytearray(-(-size // PAYLOAD))


def _store(fd: int, data: bytes, have: bytearray, seq: int) -> None:
    # As the receive path does: the write returns, then the packet is marked.
    os.pwrite(fd, data[seq * PAYLOAD : (seq + 1) * PAYLOAD], seq * PAYLOAD)
    have[seq] = 1


def _let_it_catch_up(digest: RunningDigest, have: bytearray, ahead: bool) -> None:
    # Until the thread has hashed the whole chunks of the stored prefix (bounded).
    if not ahead:
        return
    missing = have.find(0)
    prefix = len(have) * PAYLOAD if missing < 0 else missing * PAYLOAD
    want = min(prefix, digest.size) // CHUNK_BYTES * CHUNK_BYTES
    deadline = time.monotonic() + 30.0
    while digest.hashed_ahead < want and time.monotonic() < deadline:
        threading.Event().wait(0.002)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.sampled_from([0, 1, PAYLOAD, CHUNK_BYTES, CHUNK_BYTES + 1])
    | st.integers(2 * CHUNK_BYTES, 3 * CHUNK_BYTES + 7),
    seed=st.integers(0, 2**32 - 1),
    ahead=st.booleans(),
)
def test_the_digest_is_the_files_whatever_the_order_of_arrival(
    fd: int, size: int, seed: int, ahead: bool
) -> None:
    data, have = _file(fd, size)
    digest = RunningDigest(fd, size, PAYLOAD, have, ahead=ahead)
    order = list(range(len(have)))
    rng = random.Random(seed)
    # Mostly in order with a few late packets, as a blast with some loss arrives, in
    # four phases; after each the thread is given time to hash what it may.
    late = set(rng.sample(order, min(len(order), rng.randint(0, 20))))
    arrivals = [s for s in order if s not in late] + sorted(late)
    for phase in range(4):
        for seq in arrivals[phase * len(arrivals) // 4 : (phase + 1) * len(arrivals) // 4]:
            _store(fd, data, have, seq)
        _let_it_catch_up(digest, have, ahead and size > CHUNK_BYTES)
    assert digest.finish() == hashlib.sha256(data).hexdigest()
    assert 0 <= digest.hashed_ahead <= size
    if not ahead or size <= CHUNK_BYTES:
        assert digest.hashed_ahead == 0


def test_it_hashes_ahead_while_the_file_is_incomplete(fd: int) -> None:
    size = 4 * CHUNK_BYTES
    data, have = _file(fd, size)
    digest = RunningDigest(fd, size, PAYLOAD, have, ahead=True)
    for seq in range(len(have) - 1):  # all but the last packet
        _store(fd, data, have, seq)
    deadline = time.monotonic() + 30.0
    while digest.hashed_ahead < 3 * CHUNK_BYTES and time.monotonic() < deadline:
        threading.Event().wait(0.005)
    assert digest.hashed_ahead >= 3 * CHUNK_BYTES  # whole chunks of the stored prefix
    _store(fd, data, have, len(have) - 1)
    assert digest.finish() == hashlib.sha256(data).hexdigest()


def test_an_incomplete_file_has_no_digest_and_close_stops_the_thread(fd: int) -> None:
    size = 2 * CHUNK_BYTES + 1
    data, have = _file(fd, size)
    digest = RunningDigest(fd, size, PAYLOAD, have, ahead=True)
    _store(fd, data, have, 0)
    with pytest.raises(ValueError, match="not complete"):
        digest.finish()
    digest.close()
    digest.close()  # idempotent
    assert not any(t.name == "blastrate-digest" and t.is_alive() for t in threading.enumerate())


def test_a_receiver_on_one_core_does_not_hash_ahead(fd: int) -> None:
    # The default follows the CPUs this process may run on.
    size = 2 * CHUNK_BYTES
    _, have = _file(fd, size)
    digest = RunningDigest(fd, size, PAYLOAD, have)
    assert (digest._thread is not None) == (len(os.sched_getaffinity(0)) > 1)
    digest.close()
