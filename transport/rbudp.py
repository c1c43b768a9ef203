"""RBUDP file-transfer time, the paper's equations (2) and (3) as fixed by SPEC section 4.

With ``B = B_send / 8`` the sending rate in bytes/s, ``S`` the payload plus overhead
(bytes), ``S_pkt`` the payload per packet (bytes), ``T_prop`` the one-way propagation
delay (s) and ``l`` the loss probability at that rate::

    N_resend = ln(S_pkt / S) / ln(l)       0 < l < 1;   N_resend = 0 when l = 0
    S_i      = S * l**i
    T = [T_prop + S / B]                                                   first blast
      + [N_resend * T_prop + sum_{i=1..ceil(N_resend)} l * S_{i-1} / B]    resends
      + [(N_resend + 1) * (S / (8 * S_pkt * B) + T_prop)]                  feedback

Conventions fixed here (the paper leaves them open):

* ``S`` (``S_total`` in the paper) is ``file_size + ceil(file_size / S_pkt) * header``:
  every packet carries ``S_pkt`` payload bytes and ``header`` bytes of UDP/IP overhead.
  The default header of 32 bytes is the paper's (UDP 8 + IP 24 = 1500 - 1468);
  ``header_bytes=0`` makes ``S`` the file size.
* ``rounds = ceil(N_resend) + 1``: the first blast plus the resend rounds summed in the
  second term.  The second and third terms use the real-valued ``N_resend`` itself, as the
  paper writes them; only the sum of resent bytes uses its ceiling.
* ``l >= 1``: the transfer never completes.  ``completes`` is False there and the total
  (and the resend/feedback terms, ``n_resend``, ``rounds``) hold ``+inf`` internally;
  :meth:`TransferTime.to_dict` turns them into ``None`` so no infinity reaches JSON.
* A transfer of at most one packet (``S <= S_pkt``) gives ``ln(S_pkt / S) >= 0``, i.e. a
  non-positive ``N_resend``; it is taken as 0 (eq. 3 counts the rounds until less than one
  packet is left, and none is needed).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from queues import compiled_kernels_preferred

from . import _validation as check
from ._json import json_array
from .errors import TransportParameterError

__all__ = [
    "DEFAULT_HEADER_BYTES",
    "DEFAULT_PACKET_PAYLOAD_BYTES",
    "TransferTerms",
    "TransferTime",
    "total_size_bytes",
    "transfer_time",
    "transfer_time_terms",
]

#: Payload per packet S_pkt (bytes): a 1500-byte Ethernet MTU minus 32 bytes of UDP/IP.
DEFAULT_PACKET_PAYLOAD_BYTES = 1468
#: Overhead per packet (bytes): UDP 8 + IP 24, as in the paper (1500 - 1468).
DEFAULT_HEADER_BYTES = 32


class TransferTerms(NamedTuple):
    """The pieces of T from :func:`transfer_time_terms`: 1-D arrays, one entry per rate.

    Attributes
    ----------
    first_blast_s, resend_s, feedback_s : ndarray
        The three terms of T (s); see :class:`TransferTime`.
    total_s : ndarray
        T (s); ``+inf`` where ``completes`` is False.
    n_resend : ndarray
        ``N_resend`` (resend rounds, real-valued); ``+inf`` where the transfer never ends.
    rounds : ndarray
        ``ceil(N_resend) + 1`` as floats (whole numbers, or ``+inf``).
    completes : ndarray of bool
        True where the loss is below 1.
    """

    first_blast_s: NDArray[np.float64]
    resend_s: NDArray[np.float64]
    feedback_s: NDArray[np.float64]
    total_s: NDArray[np.float64]
    n_resend: NDArray[np.float64]
    rounds: NDArray[np.float64]
    completes: NDArray[np.bool_]


def transfer_time_terms(
    rate_bps: NDArray[np.float64],
    loss: NDArray[np.float64],
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
) -> TransferTerms:
    """T and its terms for already validated 1-D arrays: the search's hot path.

    :func:`transfer_time` is the checked entry point; this one trusts its caller (a
    search that calls it thousands of times with arrays it built itself) with the
    values, and checks only that the two arrays are 1-D and of one length (the compiled
    loop would otherwise read past the end of the shorter one).

    Parameters
    ----------
    rate_bps : ndarray
        Sending rates B_send (bit/s), finite and > 0, 1-D.
    loss : ndarray
        Loss probability at each rate (dimensionless), >= 0 and not NaN, same shape.
    total_bytes : float
        S, payload plus overhead (bytes), from :func:`total_size_bytes`.
    payload_bytes : float
        S_pkt (bytes), >= 1.
    delay_s : float
        One-way propagation delay T_prop (s), > 0.

    Returns
    -------
    TransferTerms
        Fresh arrays (never views of the inputs) of the same shape as ``rate_bps``.

    Raises
    ------
    ValueError
        When ``rate_bps`` and ``loss`` are not 1-D arrays of the same length.

    Examples
    --------
    >>> import numpy as np
    >>> t = transfer_time_terms(np.array([1e9]), np.array([0.0]), 1.5e6, 1468.0, 0.1)
    >>> t.rounds.tolist(), t.completes.tolist()
    ([1.0], [True])
    """
    rate = np.ascontiguousarray(rate_bps, dtype=np.float64)
    losses = np.ascontiguousarray(loss, dtype=np.float64)
    if rate.ndim != 1 or losses.shape != rate.shape:
        raise ValueError(
            f"rate_bps and loss must be 1-D arrays of one length, got shapes {rate.shape} "
            f"and {losses.shape}"
        )
    # One compiled loop (transport._kernels) with the arithmetic of the module
    # docstring, or its NumPy twin in a process that has not loaded Numba (the same
    # doubles; queues.compiled_kernels_preferred).
    if compiled_kernels_preferred(0):
        from . import _kernels as steps
    else:
        from . import _kernels_numpy as steps  # type: ignore[no-redef]
    return TransferTerms(
        *steps.time_terms(rate, losses, float(total_bytes), float(payload_bytes), float(delay_s))
    )


def total_size_bytes(
    file_size_bytes: int,
    *,
    packet_payload_bytes: int = DEFAULT_PACKET_PAYLOAD_BYTES,
    header_bytes: int = DEFAULT_HEADER_BYTES,
) -> int:
    """The payload plus overhead S (``S_total``) that the transfer puts on the wire.

    ``S = file_size + ceil(file_size / S_pkt) * header``: the file is cut into packets of
    ``S_pkt`` payload bytes (the last one possibly shorter) and every packet carries
    ``header`` bytes of protocol overhead.

    Parameters
    ----------
    file_size_bytes : int
        Size of the file (bytes), >= 1.  Integral floats such as ``5e8`` are accepted.
    packet_payload_bytes : int, default 1468
        Payload per packet S_pkt (bytes), >= 1.
    header_bytes : int, default 32
        Overhead per packet (bytes), >= 0: UDP 8 + IP 24 by default, as in the paper;
        0 makes S the file size.

    Returns
    -------
    int
        S (bytes), computed exactly in integer arithmetic.

    Raises
    ------
    TransportParameterError
        (a ``ValueError``) naming the parameter: a size that is not a whole number, is out
        of range, or a total above 2**53 bytes.

    Examples
    --------
    >>> total_size_bytes(500_000_000)  # 340,600 packets of at most 1468 bytes
    510899200
    >>> total_size_bytes(500_000_000, header_bytes=0)
    500000000
    """
    size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
    payload = check.whole_number(packet_payload_bytes, "packet_payload_bytes", minimum=1)
    header = check.whole_number(header_bytes, "header_bytes", minimum=0)
    packets = -(-size // payload)  # ceil in integers: exact for any size
    total = size + packets * header
    if total > check.MAX_BYTES:
        raise TransportParameterError(
            "file_size_bytes",
            f"payload plus overhead is {total} bytes, above the supported {check.MAX_BYTES}",
        )
    return total


@dataclass(frozen=True)
class TransferTime:
    """RBUDP transfer time and its three terms, one entry per (rate, loss) pair.

    All arrays are read-only and have the broadcast shape of the inputs (0-d for two
    scalars).  Where ``completes`` is False (``loss >= 1``) the transfer never finishes:
    ``total_s``, ``resend_s``, ``feedback_s``, ``n_resend`` and ``rounds`` hold ``+inf``
    there.  Test ``completes`` rather than the value, and use :meth:`to_dict` for JSON.

    Attributes
    ----------
    send_rate_bps : ndarray
        Sending rate B_send (bit/s), as given (broadcast).
    loss : ndarray
        Loss probability l at that rate (dimensionless), as given (broadcast).
    total_s : ndarray
        Transfer time T (s): ``first_blast_s + resend_s + feedback_s``.
    first_blast_s : ndarray
        First term, ``T_prop + S / B`` (s): one propagation delay plus the whole of S.
    resend_s : ndarray
        Second term, ``N_resend * T_prop + sum_{i=1..ceil(N_resend)} l * S_{i-1} / B`` (s).
    feedback_s : ndarray
        Third term, ``(N_resend + 1) * (S / (8 * S_pkt * B) + T_prop)`` (s): a bitmap of one
        bit per packet sent back once per round.
    n_resend : ndarray
        ``N_resend = ln(S_pkt / S) / ln(l)``, real-valued, >= 0 (resend rounds); 0 when
        ``l = 0``.
    rounds : ndarray
        ``ceil(N_resend) + 1``: the first blast plus the resend rounds counted in the sum.
        A float array of whole numbers (so that never-completing entries can be +inf).
    completes : ndarray of bool
        True where ``loss < 1``.
    total_bytes : int
        S, payload plus overhead (bytes); see :func:`total_size_bytes`.
    file_size_bytes : int
        The file size (bytes).
    packet_payload_bytes : int
        S_pkt (bytes).
    header_bytes : int
        Overhead per packet (bytes).
    propagation_delay_s : float
        One-way propagation delay T_prop (s).
    """

    send_rate_bps: NDArray[np.float64]
    loss: NDArray[np.float64]
    total_s: NDArray[np.float64]
    first_blast_s: NDArray[np.float64]
    resend_s: NDArray[np.float64]
    feedback_s: NDArray[np.float64]
    n_resend: NDArray[np.float64]
    rounds: NDArray[np.float64]
    completes: NDArray[np.bool_]
    total_bytes: int
    file_size_bytes: int
    packet_payload_bytes: int
    header_bytes: int
    propagation_delay_s: float

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: lists (or scalars for 0-d), ``None`` where the transfer never
        completes (and for an infinite ``loss``), ``rounds`` as integers; no infinity or
        NaN anywhere."""
        everywhere = np.ones(self.completes.shape, dtype=bool)
        return {
            "send_rate_bps": json_array(self.send_rate_bps, everywhere),
            "loss": json_array(self.loss, everywhere),
            "completes": self.completes.tolist(),
            "total_s": json_array(self.total_s, self.completes),
            "first_blast_s": json_array(self.first_blast_s, everywhere),
            "resend_s": json_array(self.resend_s, self.completes),
            "feedback_s": json_array(self.feedback_s, self.completes),
            "n_resend": json_array(self.n_resend, self.completes),
            "rounds": json_array(self.rounds, self.completes, integer=True),
            "total_bytes": self.total_bytes,
            "file_size_bytes": self.file_size_bytes,
            "packet_payload_bytes": self.packet_payload_bytes,
            "header_bytes": self.header_bytes,
            "propagation_delay_s": self.propagation_delay_s,
        }


def transfer_time(
    send_rate_bps: ArrayLike,
    loss: ArrayLike,
    file_size_bytes: int,
    propagation_delay_s: float,
    *,
    packet_payload_bytes: int = DEFAULT_PACKET_PAYLOAD_BYTES,
    header_bytes: int = DEFAULT_HEADER_BYTES,
) -> TransferTime:
    """RBUDP transfer time T(B_send) of one file (SPEC section 4), vectorised.

    Parameters
    ----------
    send_rate_bps : float or array_like
        Sending rates B_send (bit/s), finite and > 0.
    loss : float or array_like
        Loss probability l at each rate (dimensionless), >= 0 and not NaN; broadcast
        against ``send_rate_bps``.  ``l >= 1`` (infinity included) means the transfer never
        completes.
    file_size_bytes : int
        File size (bytes), a whole number >= 1.
    propagation_delay_s : float
        One-way propagation delay T_prop (s), finite and > 0.
    packet_payload_bytes : int, default 1468
        Payload per packet S_pkt (bytes), >= 1.
    header_bytes : int, default 32
        Overhead per packet (bytes), >= 0; S = file size + ceil(file size / S_pkt) * header.

    Returns
    -------
    TransferTime
        Total time and its three terms (s), ``n_resend``, ``rounds`` and the ``completes``
        mask, with the broadcast shape of ``send_rate_bps`` and ``loss``.

    Raises
    ------
    TransportParameterError
        (a ``ValueError``) naming the parameter and the reason: a non-positive, infinite or
        NaN rate, delay or size; a negative or NaN loss; shapes that do not broadcast.

    Notes
    -----
    ``l = 0``: ``T = T_prop + S/B + S/(8 S_pkt B) + T_prop``.  ``0 < l < 1`` with
    ``N_resend < 1`` (tiny loss) still sends one resend round of ``l * S`` bytes; the
    second term then tends to 0 as ``l -> 0``, so T is continuous there.  As ``l -> 1``,
    ``N_resend -> inf`` and T grows without bound; the sum of resent bytes uses its
    closed form ``S l (1 - l^n) / (1 - l)``, so this costs nothing.

    Examples
    --------
    >>> t = transfer_time([500e6, 1e9], [0.0, 0.01], 500_000_000, 0.1)
    >>> t.completes.tolist(), t.rounds.tolist()
    ([True, True], [1.0, 4.0])
    """
    rate = check.send_rates(send_rate_bps)
    loss_arr = check.loss_values(loss)
    delay = check.positive_real(propagation_delay_s, "propagation_delay_s", "s")
    size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
    payload = check.whole_number(packet_payload_bytes, "packet_payload_bytes", minimum=1)
    header = check.whole_number(header_bytes, "header_bytes", minimum=0)
    total_bytes = total_size_bytes(size, packet_payload_bytes=payload, header_bytes=header)
    try:
        rate_b, loss_b = np.broadcast_arrays(rate, loss_arr)
    except ValueError:
        raise TransportParameterError(
            "loss",
            f"shape {loss_arr.shape} does not broadcast against send_rate_bps {rate.shape}",
        ) from None
    shape = rate_b.shape
    # The evaluation runs on flat 1-D copies: broadcast views share memory with the
    # caller's arrays (and 0-d inputs are no 1-D arrays), and the result must not alias
    # the inputs.
    flat_rate = rate_b.ravel().copy()
    flat_loss = loss_b.ravel().copy()
    terms = transfer_time_terms(flat_rate, flat_loss, float(total_bytes), float(payload), delay)
    return TransferTime(
        send_rate_bps=flat_rate.reshape(shape),
        loss=flat_loss.reshape(shape),
        total_s=terms.total_s.reshape(shape),
        first_blast_s=terms.first_blast_s.reshape(shape),
        resend_s=terms.resend_s.reshape(shape),
        feedback_s=terms.feedback_s.reshape(shape),
        n_resend=terms.n_resend.reshape(shape),
        rounds=terms.rounds.reshape(shape),
        completes=terms.completes.reshape(shape),
        total_bytes=total_bytes,
        file_size_bytes=size,
        packet_payload_bytes=payload,
        header_bytes=header,
        propagation_delay_s=delay,
    )
