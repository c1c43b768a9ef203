"""Net files on disk: JSON (the engine's net, or a whole solve request) and PNML.

The command line reads a net with :func:`read_net_request` whatever its format, and
``blastrate convert`` writes one with :func:`write_net`.  Errors are :class:`NetFileError`
with a one-line message that names the file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import srn

__all__ = ["NetFileError", "NetFormat", "net_format", "read_net_request", "write_net"]

NetFormat = Literal["json", "pnml"]

#: Largest net file read from disk or stdin (bytes); PNML is parsed with the same bound.
MAX_FILE_BYTES = 50_000_000


class NetFileError(ValueError):
    """A net file that cannot be read or written; the message names the file."""


def net_format(path: str, text: str | None = None) -> NetFormat:
    """The format of a net file: by extension (``.pnml``, ``.xml``, ``.json``), else by content."""
    suffix = Path(path).suffix.lower()
    if suffix in (".pnml", ".xml"):
        return "pnml"
    if suffix == ".json":
        return "json"
    if text is not None and text.lstrip().startswith("<"):
        return "pnml"
    return "json"


def _read_bytes(path: str) -> bytes:
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise NetFileError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise NetFileError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    return data


def read_net_request(path: str, *, keep_pnml: bool = False) -> dict[str, Any]:
    """A ``POST /srn/solve`` body from a file: JSON (a request or a bare net) or PNML.

    Parameters
    ----------
    path : str
        File name, or ``-`` for standard input.
    keep_pnml : bool, default False
        Give a (UTF-8) PNML file as the request's ``pnml`` field, as the API takes it, so
        that the answer is keyed by the file's own ids; else convert it to a JSON net.

    Returns
    -------
    dict
        ``{"net": {...}, ...}``; a PNML file becomes ``{"net": <its JSON net>}``, or
        ``{"pnml": <its text>}`` with ``keep_pnml``.

    Raises
    ------
    NetFileError
        If the file cannot be read or parsed; the message names the file and, for PNML,
        the element and line.
    """
    data = _read_bytes(path)
    head = data[:200].decode("utf-8", errors="replace")
    if net_format(path, head) == "pnml":
        try:
            net = srn.read_pnml(data, limits=srn.PnmlLimits(max_bytes=MAX_FILE_BYTES))
        except srn.PnmlError as exc:
            raise NetFileError(f"{path}: {exc}") from None
        if keep_pnml:
            try:
                return {"pnml": data.decode("utf-8")}
            except UnicodeDecodeError:
                pass  # another encoding: the converted net (keyed by engine names)
        return {"net": net.to_dict()}
    try:
        parsed = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NetFileError(f"{path}: not a UTF-8 text file") from None
    except json.JSONDecodeError as exc:
        raise NetFileError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise NetFileError(f"{path}: expected a JSON object")
    return parsed if "net" in parsed else {"net": parsed}


def write_net(
    net: dict[str, Any], path: str, fmt: NetFormat, *, dialect: Literal["pipe", "storm"] = "pipe"
) -> None:
    """Write a JSON net to ``path`` (``-`` for standard output) as JSON or PNML.

    Raises
    ------
    NetFileError
        If the net is invalid, uses what PNML cannot hold (expressions, guards), or the
        file cannot be written.
    """
    try:
        model = srn.Net.from_dict(net)
        if fmt == "pnml":
            text = srn.write_pnml(model, dialect=dialect)
        else:
            text = json.dumps(model.to_dict(), indent=2) + "\n"
    except srn.SRNError as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise NetFileError(f"{path}: cannot write as {fmt}{where}: {exc}") from None
    try:
        if path == "-":
            sys.stdout.write(text)
        else:
            Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise NetFileError(f"{path}: {exc.strerror or exc}") from None
