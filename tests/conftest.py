from hypothesis import settings

from budget import PROFILE

# Examples per property test that states no count: 30 by default ("dev" here, hypothesis' own "ci"
# profile under CI=true, derandomized), 200 under HYPOTHESIS_PROFILE=thorough; tests that state a count
# state both (tests/budget.py).
settings.register_profile("dev", max_examples=30)
settings.register_profile("ci", settings.get_profile("ci"), max_examples=30)
settings.register_profile("thorough", max_examples=200, deadline=None)
settings.load_profile(PROFILE)
