"""The estimate's measured error (advisor.inputs.uncertainty) is what the data measures: each shipped
figure equals benchmarks/uncertainty.py's statistic of the dev data and the repo's measurements."""

from __future__ import annotations

import pytest

from advisor import Training
from advisor.inputs.uncertainty import EXPERT_MEMORY_SHARE, MEMORY_ERROR, STEP_TIME_ERROR, memory_headroom

uncertainty = pytest.importorskip("benchmarks.uncertainty")


@pytest.fixture(scope="module")
def measured():
    from benchmarks.published import default_path
    if not default_path().exists() or not uncertainty.measured_h200.DEFAULT.exists():
        pytest.skip("needs ../shared/data")
    return uncertainty.measure()


@pytest.mark.parametrize("key, shipped", [("step_time", STEP_TIME_ERROR), ("memory", MEMORY_ERROR),
                                          ("expert_memory_share", EXPERT_MEMORY_SHARE)])
def test_each_shipped_figure_is_the_measured_one(measured, key, shipped):
    assert measured[key] == (shipped.value, shipped.n)


def test_the_memory_headroom_is_the_measured_error_unless_the_training_asks_for_more():
    assert memory_headroom(Training()) == MEMORY_ERROR.value
    assert memory_headroom(Training(memory_headroom=0.1)) == 0.1
