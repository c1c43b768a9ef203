"""``python -m app.commands``: the ``blastrate`` command line."""

from . import main

main()
