import os

from hypothesis import settings

# CI sets CI=true: hypothesis' built-in "ci" profile is selected automatically there.
settings.register_profile("dev", max_examples=60)
if not os.environ.get("CI"):
    settings.load_profile("dev")
