"""``python -m jaxrank`` runs the ``jaxrank`` command line (no command: its help)."""

import sys

from jaxrank.cli import main

sys.exit(main())
