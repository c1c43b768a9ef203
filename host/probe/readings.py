"""A probed value and where it came from.

Nothing the probe reports is a silent guess: every value carries its ``source`` (the
file, call or command it was read from, or the named default used instead), and a value
that could not be read carries ``unread``, the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Reading", "under_root"]


@dataclass(frozen=True)
class Reading:
    """One probed value.

    Attributes
    ----------
    value : object
        The value (in the unit its name says), or the default used when unread; None
        when unread and there is no default.
    source : str
        Where the value came from, e.g. ``"/sys/class/net/eth0/mtu"``, or
        ``"default: profile sx280-2007"`` when the value is a default.
    unread : str or None
        Why the value could not be read; None when it was read.
    """

    value: Any
    source: str
    unread: str | None = None

    @property
    def was_read(self) -> bool:
        """True when the value was read from the host (not a default)."""
        return self.unread is None

    def to_dict(self) -> dict[str, Any]:
        """``{"value", "source"}`` plus ``"unread"`` (the reason) when not read."""
        out: dict[str, Any] = {"value": self.value, "source": self.source}
        if self.unread is not None:
            out["unread"] = self.unread
        return out

    @classmethod
    def defaulted(cls, value: Any, default_name: str, reason: str) -> Reading:
        """An unread value replaced by the named default ``default_name``."""
        return cls(value, f"default: {default_name}", reason)


def under_root(root: str | Path, path: str) -> Path:
    """``path`` (absolute, e.g. ``"/proc/stat"``) inside the file-system root ``root``."""
    return Path(root) / path.lstrip("/")


def shown(path: Path, root: str | Path) -> str:
    """``path`` as the host sees it (relative to ``root``), for a ``source`` string."""
    try:
        return "/" + str(path.relative_to(Path(root)))
    except ValueError:
        return str(path)
