"""The receiver models a rate can come from, and which one answers where none is named.

Two models predict the effective bottleneck rate:

* ``"paper"``: the paper's model.  The receiver is served at its processor-sharing
  share, and each blast is scored by the NIC queue's stationary loss
  (:func:`transport.workload_bottleneck_rate`).  Milliseconds at the paper's K = 64;
  70-543 ms per answer at K = 1,736 on a busy receiver, since nothing of it is solved
  ahead.
* ``"timeslice"``: the scheduler's slices, the kernel's work per datagram and finite
  blasts (:func:`transport.time_slice_bottleneck_rate`).  0.2 to 2.5 s per workload,
  which a receiver solves ahead, so that an answer takes about a millisecond.

Issue #39's rule for a default: the simplest and cheapest model that no other beats
resolvably (a 95 % interval of its time over the other's wholly above 1).  Two
measurements apply it (``docs/validation.md``):

* the pooled, held-out validation (``benchmarks/validation_pool.py``, four runs on the
  version-3 data mover): the time-slice model's time over the paper's 0.989
  [0.970, 1.007] over runs.  Not resolvable: alone, this would choose ``paper``;
* ``send --rate auto`` as users run it (``benchmarks/send_auto.py``, both models in the
  same shuffled blocks): the paper's over the time-slice model's 1.192 [1.155, 1.231] out
  of the box and 1.075 [1.041, 1.111] calibrated.  The paper's model is resolvably worse
  where it advises: it predicts almost no loss into the 2 MB buffer, where the first
  blast lost up to 51 %, and it is solved while the sender waits.

So a receiver advises with :data:`DEFAULT_ADVICE_MODEL`, the time-slice model.  The
service, ``blastrate rate``/``curve`` and the planning answer with
:data:`DEFAULT_RECEIVER_MODEL`, the paper's, whose tables they reproduce; ``model=``
names the other.  ``tests/benchmarks/test_validation_pool.py`` checks that the committed
runs still choose :data:`DEFAULT_ADVICE_MODEL`.

The time-slice model's defaults and work bound (:data:`MAX_TIME_SLICE_WORK`,
:func:`time_slice_work`) live here rather than in :mod:`transport.timeslice`: the
receiver's advice and the service's routes check them at import and per request, and
importing the model itself brings Numba and the SRN engine, which the service's start
should not wait for.
"""

from typing import Literal

__all__ = [
    "DEFAULT_ADVICE_MODEL",
    "DEFAULT_RECEIVER_MODEL",
    "DEFAULT_SETTLE_S",
    "DEFAULT_TIME_SLICE_S",
    "MAX_TIME_SLICE_WORK",
    "RECEIVER_MODELS",
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

#: The model a receiver advises with when the sender names none (``send --rate auto``):
#: the one the measurements above choose.
DEFAULT_ADVICE_MODEL: ReceiverModelName = "timeslice"

#: The model that the service, ``blastrate rate``/``curve``, the sweeps and what-if answer
#: with when none is named: the paper's, so that its tables are the default answer.
DEFAULT_RECEIVER_MODEL: ReceiverModelName = "paper"

#: Most work (``K * (7 (N + 1))^2``, about the banded solve's flops per rate,
#: :func:`time_slice_work`) one answer of the time-slice model may take: about a second for
#: a whole search on this 2-core machine.  A receiver's advice, the service and the planning
#: refuse a K and N beyond it, naming ``buffer_packets``.
MAX_TIME_SLICE_WORK = 2.0e8


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
