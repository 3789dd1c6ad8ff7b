"""``python -m graphtools`` runs the command line."""

from graphtools.launch import console_script

console_script()
