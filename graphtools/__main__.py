"""``python -m graphtools`` runs the command line."""

from graphtools.cli import console_main

console_main()
