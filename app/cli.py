"""The ``blastrate`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``blastrate`` command line and return its exit status."""
    parser = argparse.ArgumentParser(prog="blastrate", description=__doc__)
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
