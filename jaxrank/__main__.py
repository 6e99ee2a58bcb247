"""``python -m jaxrank`` runs the ``jaxrank`` command line (default: the demo)."""

import sys

from jaxrank.cli import main

sys.exit(main())
