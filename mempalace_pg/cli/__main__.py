"""``python -m mempalace_pg.cli``: the ``mempalace-pg`` command."""

import sys

from mempalace_pg.cli import main

sys.exit(main())
