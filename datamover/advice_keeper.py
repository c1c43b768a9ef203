"""Keep a receiver's advice ready before any sender asks.

A sender that asks for a rate (``blastrate send --rate auto``) waits for the answer
before its first datagram, so nothing slow may happen between its HELLO and the
receiver's ACCEPT: no look at the host, no model solve.  :class:`AdviceKeeper` does that
work ahead, in one background thread of the receiver that stands aside whenever a
transfer is being received:

1. a short look at the tasks on the receiver's CPUs (:func:`host.probe.probe_host`,
   windows of half a second with a pause between them), whose latest result the
   advisor reads in microseconds;
2. once, at the receiver's first start on a host without a profile of its own, a quick
   calibration (:func:`quick_calibration`, a few seconds: mu_net through the receive
   path of ``blastrate receive``, the I/O task, the scheduler's slice, K), stored as this
   host's default and marked ``quick`` until ``blastrate calibrate`` measures it properly;
3. the model solved ahead for the workload it sees (:meth:`ReceiverAdvisor.prepare`) and
   the refinements that answers asked for (:meth:`ReceiverAdvisor.refine_wanted`).

A window that a transfer interrupts is thrown away; the model is solved in pieces of a
few chains, the flag checked between them, so a transfer that starts meanwhile competes
with at most one piece.  The quick calibration checks it between its three measurements
only: a transfer in the first few seconds of a new host competes with one of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from host import HostProfile, Workload
from host.calibration import (
    NetCalibration,
    calibrated_profile,
    calibration_provenance,
    measure_io_service,
    measure_net_service,
    measure_time_slice,
)
from host.kernel_path import measure_kernel_share
from host.probe import HostProbe, probe_host

from .advice import AdviceError, ReceiverAdvisor
from .deferred_advice import lower_priority
from .receive_path import calibration_receive_path
from .send_calibration import send_sizes_provenance

__all__ = ["AdviceKeeper", "quick_calibration"]

log = logging.getLogger("blastrate.advice")
#: The quick calibration starts once no blast has been received for this long (s).
_CALIBRATE_AFTER_IDLE_S = 2.0


class _Interrupted(Exception):
    """A probe window cut short: the keeper is stopping or a transfer started."""


def quick_calibration(
    *,
    name: str,
    batch_packets: int,
    payload_bytes: int,
    buffer_packets: int,
    receiver_cpu: int,
    sender_cpu: int | None = None,
    directory: str | None = None,
    between: Callable[[], None] | None = None,
    rcvbuf_bytes: int | None = None,
) -> tuple[HostProfile, dict[str, Any]]:
    """This host's profile in a few seconds: what a receiver measures at its first start.

    The same tasks as ``blastrate calibrate``, each shortened: mu_net from two runs of
    0.4 s of the receive path of ``blastrate receive``
    (:func:`datamover.receive_path.calibration_receive_path`), mu_io_cpu and mu_disk from
    two runs of 100 random lines of a 16 MiB file, the scheduler's slice from two runs of
    0.5 s, and, where a veth link can be made (root), the kernel's cost per datagram k
    from two runs of 0.5 s, the receive path's cost per wake-up and per datagram from
    two passes over four paced runs of 0.25 s (then mu_net is ``1 / (a + N b)``), and
    c_1..c_3 from one run of 0.3 s each (:func:`host.kernel_path.measure_kernel_share`),
    and the sender's time per call from three paced transfers over loopback beside the
    socket filled at each send size
    (:func:`datamover.send_calibration.measure_send_sizes`).
    Coefficients of variation come out several times those of a full calibration; the
    provenance says ``"kind": "quick"``.

    Parameters
    ----------
    name : str
        The profile's name.
    batch_packets, payload_bytes, buffer_packets : int
        N, the payload per datagram (bytes) and K of the receiver.
    receiver_cpu : int
        The receiver's CPU.
    sender_cpu : int, optional
        The calibration's sender's CPU; default another this process may use, as
        ``blastrate calibrate`` picks it (:func:`host.calibration.measure_net_service`).
    directory : str, optional
        Where the I/O task's file goes (default: the temporary directory).
    between : callable, optional
        Called between the measurements (a receiver waits there while it receives).
    rcvbuf_bytes : int, optional
        The receiver's SO_RCVBUF (None: the system default), whose socket K counts.

    Returns
    -------
    profile : HostProfile
    provenance : dict
    """
    started = time.time()
    datagrams, path = calibration_receive_path(payload_bytes)
    runs = []
    for _ in range(2):  # one run at a time, so that a blast that starts waits for one
        if between is not None:
            between()
        runs.append(
            measure_net_service(
                batch_packets=batch_packets,
                payload_bytes=payload_bytes,
                datagrams=datagrams,
                receive_path=path,
                runs=1,
                seconds=0.4,
                receiver_cpu=receiver_cpu,
                sender_cpu=sender_cpu,
            )
        )
    net = NetCalibration.pooled(runs)
    kernel = measure_kernel_share(
        rx_cpu=net.cpus[0],
        tx_cpu=net.cpus[1],
        line_rate_bps=net.sender_rate_bps.mean,
        sender_rate_bps=net.sender_rate_bps.mean,
        datagrams=datagrams,
        payload_bytes=payload_bytes,
        receive_path=path,
        batch_packets=batch_packets,
        capacity_pps=net.mu_net.mean * batch_packets,
        runs=2,
        seconds=0.5,
        between=between,
    )
    if between is not None:
        between()
    sends = send_sizes_provenance(
        payload_bytes=payload_bytes,
        buffer_packets=buffer_packets,
        rate_bps=net.sender_rate_bps.mean,
        rcvbuf_bytes=rcvbuf_bytes,
        receiver_cpu=net.cpus[0],
        sender_cpu=net.cpus[1],
    )
    if between is not None:
        between()
    io = measure_io_service(
        directory=directory, file_bytes=16 * 2**20, runs=2, reads=100, cpu=receiver_cpu
    )
    if between is not None:
        between()
    time_slice = measure_time_slice(cpu=receiver_cpu, runs=2, seconds=0.5)
    profile = calibrated_profile(
        name,
        net,
        io,
        buffer_packets=buffer_packets,
        line_rate_bps=net.sender_rate_bps.mean,
        mu_net=kernel.mu_net(min(batch_packets, buffer_packets)),  # the profile's N
    )
    provenance = calibration_provenance(
        net,
        io,
        time_slice,
        method="a receiver's quick calibration at first start (datamover.advice_keeper)",
        started_unix=started,
        buffer_packets=buffer_packets,
        kind="quick",
        line_rate_source="measured sender",
        **kernel.provenance(),
        **sends,
    )
    return profile, provenance


class AdviceKeeper:
    """One background thread that keeps a :class:`ReceiverAdvisor` ready to answer.

    Parameters
    ----------
    advisor : ReceiverAdvisor
        The receiver's advisor; the keeper becomes its workload source
        (``advisor.workload`` and ``advisor.workload_info``).
    busy : callable
        ``busy() -> bool``: True while the receiver is receiving a blast; the keeper
        stands aside then.
    calibrate : callable, optional
        Run once before anything is solved (the receiver's quick calibration, which
        stores the profile that ``advisor.own`` then reads); its failure is logged and
        the receiver goes on with the profile it has.
    window_s : float, default 0.5
        Length of one look at the host (s).
    samples : int, default 5
        Task-state samples per look.
    pause_s : float, default 1.0
        Rest between looks (s).
    probe : callable, optional
        ``probe(interval_s=, samples=, sleep=) -> HostProbe``; default
        :func:`host.probe.probe_host` (this process left out).
    on_ready : callable, optional
        Called once, from the thread, when the model is first solved ahead for the
        workload it sees (after the calibration, if any).
    """

    def __init__(
        self,
        advisor: ReceiverAdvisor,
        *,
        busy: Callable[[], bool],
        calibrate: Callable[[], None] | None = None,
        window_s: float = 0.5,
        samples: int = 5,
        pause_s: float = 1.0,
        probe: Callable[..., HostProbe] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.advisor = advisor
        self.on_ready = on_ready
        self.busy = busy
        self.calibrate = calibrate
        self.window_s = float(window_s)
        self.samples = int(samples)
        self.pause_s = float(pause_s)
        self._probe = probe or probe_host
        self._stop = threading.Event()
        self._first = threading.Event()
        self._calibrated = threading.Event()
        self._latest: tuple[frozenset[int], Workload, float] | None = None
        self._thread: threading.Thread | None = None
        self.windows = 0
        self.error: str | None = None
        advisor.workload = self.workload
        advisor.workload_info = self.info

    # -- the advisor's view ----------------------------------------------------------------

    def workload(self, cpus: Collection[int]) -> Workload:
        """The tasks competing for ``cpus`` at the latest look (no waiting once there is
        one; before the first, at most one window).  Before any look: none."""
        latest = self._latest
        if latest is None and self._first.wait(self.window_s + 0.5):
            latest = self._latest
        if latest is None:
            return Workload(cpu_tasks=0, io_tasks=0, cores=len(cpus))
        seen_cpus, workload, _ = latest
        if seen_cpus != frozenset(cpus):
            raise AdviceError("cpus", "the keeper samples this receiver's own CPUs only")
        return workload

    def info(self) -> dict[str, Any]:
        """What an answer says of the workload: how old the latest look is (s; None
        before the first) and whether the quick calibration is still running."""
        latest = self._latest
        return {
            "workload_age_s": None if latest is None else time.monotonic() - latest[2],
            "calibrating": self.calibrate is not None and not self._calibrated.is_set(),
        }

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="blastrate-advice", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and wait for it (at most ``timeout`` beyond one chain batch)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the first look has been taken and the calibration (if any) is over."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for event in (self._first, self._calibrated):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not event.wait(left):
                return False
        return True

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            if self._stop.is_set() or self.busy():
                raise _Interrupted
            left = end - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, 0.02))

    def _look(self) -> bool:
        try:
            probe = self._probe(interval_s=self.window_s, samples=self.samples, sleep=self._sleep)
        except _Interrupted:
            return False
        cpus = self.advisor.cpus
        self._latest = (cpus, probe.workload_on(cpus), time.monotonic())
        self.windows += 1
        self._first.set()
        return True

    def _stand_aside(self) -> bool:
        return self._stop.is_set() or self.busy()

    def _run(self) -> None:
        lower_priority()
        first = True
        while not self._stop.is_set():
            if self.busy():
                self._stop.wait(0.02)
                continue
            try:
                if not self._look():
                    continue
                if first:
                    first = False
                    self._run_calibration()
                latest = self._latest
                self.advisor.prepare(latest[1] if latest else None, stop=self._stand_aside)
                self.advisor.refine_wanted(stop=self._stand_aside)
                self.error = None
                if self.on_ready is not None and not self._stand_aside():
                    ready, self.on_ready = self.on_ready, None
                    ready()
            except Exception as exc:  # reported once, and the next look tries again
                error = f"{type(exc).__name__}: {exc}"[:400]
                if error != self.error:
                    log.warning("advice keeper: %s", error)
                self.error = error
            # Rest, but take a refinement that an answer asked for as soon as it is asked.
            if self.advisor.wanted.wait(self.pause_s) and not self._stand_aside():
                try:
                    self.advisor.refine_wanted(stop=self._stand_aside)
                except Exception as exc:
                    self.error = f"{type(exc).__name__}: {exc}"[:400]

    def _run_calibration(self) -> None:
        if self.calibrate is None:
            self._calibrated.set()
            return
        try:
            # Not into a user's first transfers: after the receiver has been idle a
            # while (its blasts on loopback would compete with theirs).
            idle_since = time.monotonic()
            while (
                not self._stop.is_set() and time.monotonic() - idle_since < _CALIBRATE_AFTER_IDLE_S
            ):
                if self.busy():
                    idle_since = time.monotonic()
                self._stop.wait(0.05)
            self.calibrate()
        except Exception as exc:
            self.error = f"quick calibration failed: {type(exc).__name__}: {exc}"[:400]
            log.warning("%s", self.error)
        finally:
            self._calibrated.set()
