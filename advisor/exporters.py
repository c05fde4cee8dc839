"""The old name of `advisor.export` (the exporters, one module per framework), kept so that
`from advisor import exporters` goes on working for one release; import `advisor.export`."""

from .export import *  # noqa: F401,F403
from .export import __all__  # noqa: F401
