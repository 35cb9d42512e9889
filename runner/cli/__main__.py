"""``python -m runner.cli`` = the ``isocost`` command."""

from runner.cli import main

main()
