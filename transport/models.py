"""The receiver models a rate can come from, and which one answers where none is named.

Two models predict the effective bottleneck rate:

* ``"paper"``: the paper's model.  The receiver is served at its processor-sharing
  share, and each blast is scored by the NIC queue's stationary loss
  (:func:`transport.workload_bottleneck_rate`).  Milliseconds at the paper's K = 64;
  70-543 ms per answer at K = 1,736 on a busy receiver, since nothing of it is solved
  ahead.
* ``"timeslice"``: the scheduler's slices, the kernel's work per datagram and finite
  blasts (:func:`transport.time_slice_bottleneck_rate`).  20 ms to 0.7 s per workload,
  which a receiver solves ahead, so that an answer takes about a millisecond.

Issue #39's rule for a default: the simplest and cheapest model that no other beats
resolvably (a 95 % interval of its time over the other's wholly above 1).  Two
measurements apply it (``docs/validation.md``):

* the pooled, held-out validation (``benchmarks/validation_pool.py``, eight runs on the
  version-3 data mover, ``docs/results/validation_pool.json``): the time-slice model's
  transfer time over the paper's 0.987 [0.973, 1.000] over runs, so the paper's model is
  resolvably worse, by a hair (over the first four runs alone it was not:
  0.989 [0.970, 1.007]);
* ``send --rate auto`` as users run it (``benchmarks/send_auto.py``, both models in the
  same shuffled blocks): the paper's over the time-slice model's 1.192 [1.155, 1.231] out
  of the box and 1.075 [1.041, 1.111] calibrated.  The paper's model predicts almost no
  loss into the 2 MB buffer, where the first blast lost up to 51 %.

Within the time-slice model, the same rule chose the sender's send sizes
(:class:`transport.SendSizes`: each rate solved with the K and N of the sends that reach
the socket) on three fresh runs (19-21, 2026-11-29): the model without them took 1.072
[1.005, 1.131] of the time of the model with them, and no model was resolvably better
than the one with them.  On the latest eight fresh runs of the same model (26-33) the model
without them took 1.086 of the time of the model with them (1 / 0.921 [0.888, 0.952]).
A calibration that measured the sends (``blastrate calibrate``, a receiver's quick
calibration) feeds them; without one, datagrams arrive singly.

So :data:`DEFAULT_RECEIVER_MODEL` is the time-slice model everywhere a model answers: a
receiver's advice (``send --rate auto``), the service, ``blastrate rate``/``curve``, the
sweeps, the plots and the page.  ``model=paper`` names the paper's model, whose tables it
reproduces exactly; what-if ranks with it unless told otherwise (seventy variants of the
time-slice model take half a minute).  ``tests/benchmarks/test_validation_pool.py``
checks that the committed runs still choose :data:`DEFAULT_RECEIVER_MODEL`.

The time-slice model's defaults and work bound (:data:`MAX_TIME_SLICE_WORK`,
:func:`time_slice_work`) live here rather than in :mod:`transport.timeslice`: the
receiver's advice and the service's routes check them at import and per request, and
importing the model itself brings Numba and the SRN engine, which the service's start
should not wait for.
"""

from typing import Literal

__all__ = [
    "DEFAULT_RECEIVER_MODEL",
    "DEFAULT_SETTLE_S",
    "DEFAULT_TIME_SLICE_S",
    "MAX_TIME_SLICE_CURVE_WORK",
    "MAX_TIME_SLICE_WORK",
    "RECEIVER_MODELS",
    "TIME_SLICE_NIC_SERVICE",
    "NicService",
    "ReceiverModelName",
    "time_slice_work",
]

#: How the paper's NIC queue models the interrupt service time: ``"exponential"`` with
#: rate ``mu = 1 / E[S]`` (the paper's), or ``"phase-type"`` with stage 1's ``(alpha, T)``.
NicService = Literal["exponential", "phase-type"]

#: A receiver model's name.
ReceiverModelName = Literal["paper", "timeslice"]

#: The receiver models, simplest and cheapest first: the order in which issue #39's rule
#: considers them.
RECEIVER_MODELS: tuple[ReceiverModelName, ...] = ("paper", "timeslice")

#: The model that answers where none is named: a receiver's advice (``send --rate
#: auto``), the service, ``blastrate rate``/``curve``, the sweeps, the plots and the page.
#: The one the measurements above choose.
DEFAULT_RECEIVER_MODEL: ReceiverModelName = "timeslice"

#: Why ``nic_service="phase-type"`` is refused with the time-slice model (the same words
#: from the service, the CLI and the planning).
TIME_SLICE_NIC_SERVICE = (
    "the time-slice model (the default model) takes the exponential NIC service only; "
    "phase-type is the paper's model's: name it (--model paper, model=paper)"
)

#: Most work (``K * (7 (N + 1))^2``, about the banded solve's flops per rate,
#: :func:`time_slice_work`) one rate of the time-slice model may take.  A whole search
#: scores about 49 rates: 0.76 s at K = 1,736 and N = 6 (4e6 a rate) on this 2-core
#: machine; a one-shot ``blastrate rate`` (C = 2, I = 1) took 4.1 s at K = 8,192 and
#: 20.8 s at K = 40,000 (1e8 a rate); the wall-time limits (``--timeout``,
#: ``solve_timeout_s``) bound the rest.  A receiver's advice, the service and the planning
#: refuse a K and N beyond it, naming ``buffer_packets``.
MAX_TIME_SLICE_WORK = 2.0e8

#: Most work a curve of the time-slice model may take: its points times
#: ``max(K (7 (N + 1))^2, 2e5)`` (each point is a chain of its own; 2e5 stands for a small
#: chain's fixed cost, about a millisecond).  About 2 s here: 2,000 points at K = 64 and
#: N = 6, 95 at K = 1,736.  ``curve_points`` beyond it is refused, naming itself.
MAX_TIME_SLICE_CURVE_WORK = 4.0e8


#: The kernel's default slice where none was calibrated: EEVDF's base slice of 0.75 ms
#: scaled by 1 + log2(CPUs) on a two-CPU host (s).
DEFAULT_TIME_SLICE_S = 1.5e-3
#: The receiver's wait for stragglers after a lossy blast where none is given (s): what
#: ``blastrate receive`` waits by default.
DEFAULT_SETTLE_S = 0.02


def time_slice_work(buffer_packets: int, batch_packets: int) -> int:
    """Rough work of scoring one rate: ``K * (7 (N + 1))^2`` (about the banded solve's
    flops for the chain of :func:`time_slice_bottleneck_rate`; N at most K)."""
    n = min(batch_packets, buffer_packets)
    return buffer_packets * (7 * (n + 1)) ** 2
