"""``python -m jarvis``: the same command line as the ``jarvis`` script."""

from jarvis.entrypoints.cli import main

main()
