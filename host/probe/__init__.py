"""Probe of the live receiving host (filled in by the next commits)."""
