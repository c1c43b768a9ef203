"""The receiver models a rate can come from, and the one that answers by default.

Two models predict the effective bottleneck rate:

* ``"paper"``: the paper's model.  The receiver is served at its processor-sharing
  share, and each blast is scored by the NIC queue's stationary loss
  (:func:`transport.workload_bottleneck_rate`).  It costs milliseconds.
* ``"timeslice"``: the scheduler's slices, the kernel's work per datagram and finite
  blasts (:func:`transport.time_slice_bottleneck_rate`).  It costs 0.2 to 2.5 s per
  workload, solved ahead by a receiver.

The default follows the pooled, held-out validation (``benchmarks/validation_pool.py``,
``docs/validation.md``).  The rule: take the simplest and cheapest model that no other
model beats resolvably, that is, with a 95 % interval over runs wholly below 1.  Over the
four committed runs on the version-3 data mover, the time-slice model's time over the
paper's was 0.989 [0.970, 1.007]: not resolvably better.  So the paper's model advises,
and the time-slice model stays a named option.  ``tests/benchmarks/test_validation_pool.py``
checks that the committed runs still choose :data:`DEFAULT_RECEIVER_MODEL`.
"""

from typing import Literal

__all__ = ["DEFAULT_RECEIVER_MODEL", "RECEIVER_MODELS", "ReceiverModelName"]

#: A receiver model's name.
ReceiverModelName = Literal["paper", "timeslice"]

#: The receiver models, simplest and cheapest first: the order in which the validation's
#: rule considers them.
RECEIVER_MODELS: tuple[ReceiverModelName, ...] = ("paper", "timeslice")

#: The model that answers when none is named: the service, ``blastrate rate``, ``curve``
#: and a receiver's advice for ``send --rate auto``.
DEFAULT_RECEIVER_MODEL: ReceiverModelName = "paper"
