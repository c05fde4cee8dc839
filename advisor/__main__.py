"""`python -m advisor ...`: the same command line as the `advisor` script."""

import sys

from .cli import main

sys.exit(main())
