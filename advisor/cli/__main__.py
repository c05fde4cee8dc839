"""`python -m advisor.cli`."""

import sys

from . import main

sys.exit(main())
