"""``python -m jaxrank.cli`` runs the ``jaxrank`` command line, as ``python -m jaxrank`` does."""

import sys

from jaxrank.cli._main import main

sys.exit(main())
