"""Defaults of :class:`app.settings.Settings` that the command line reads without it.

Loading pydantic-settings costs a command some 35 ms; a local ``blastrate rate`` needs
only the default chain limit, and builds :class:`~app.settings.Settings` (the one parser
of ``BLASTRATE_*`` variables) only when the variable is set.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_MAX_STATES", "setting_given"]

#: Default of ``Settings.max_states``: tangible markings a model may reach (states).
DEFAULT_MAX_STATES = 200_000


def setting_given(field: str) -> bool:
    """Whether the environment sets ``BLASTRATE_<FIELD>`` (in any case, as
    :class:`~app.settings.Settings` reads it)."""
    name = f"BLASTRATE_{field}".upper()
    return any(key.upper() == name for key in os.environ)
