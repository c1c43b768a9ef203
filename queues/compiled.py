"""Compiled pieces of the NIC queue, for callers that compile their own loops.

:func:`fixed_batch_loss_kernel` is the loss-only recursion behind
:func:`queues.loss_probability` (the fixed-batch M/M[N]/1/K queue with exponential
service), callable from other Numba functions: the transfer-time search of
:mod:`transport` runs it inside its own compiled loop rather than through Python.  It
rescales deep buffers by powers of two and computes every rate but those with
``mu / lam >= MAX_SCALED_RATIO``, for which it returns NaN; :func:`queues.loss_probability`
completes those in the log domain, and a caller of the kernel must do the same (or call
it).

A Numba function cached on disk is not recompiled when a function it calls changes in
another file: after editing :mod:`queues._fixed_kernel`, clear the Numba cache of the
callers (``__pycache__/*.nbi``, ``*.nbc``) or edit their files too.
"""

from __future__ import annotations

from ._fixed_kernel import linear_loss as fixed_batch_loss_kernel
from ._fixed_numpy import MAX_SCALED_RATIO

__all__ = ["MAX_SCALED_RATIO", "fixed_batch_loss_kernel"]
