"""``python -m graphtools`` runs the command line."""

import sys

from graphtools.cli import main

sys.exit(main())
