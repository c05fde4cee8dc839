"""`Layout.degree_formula` writes the world-size product for messages."""

import pytest

from advisor import InputError, Layout


@pytest.mark.parametrize("layout, world, formula", [
    (Layout(tp=8, pp=2, dp=4), 128, "tp(8) * cp(1) * pp(2) * dp(4) = 64 != world(128)"),
    (Layout(tp=8, pp=2, dp=4), 64, "tp(8) * cp(1) * pp(2) * dp(4) = 64 == world(64)"),
    (Layout(tp=8, cp=3, pp=2), 128, "world(128) % (tp(8) * cp(3) * pp(2)) = 32"),
])
def test_degree_formula(layout, world, formula):
    assert layout.degree_formula(world) == formula


def test_for_world_names_the_remainder():
    with pytest.raises(InputError) as raised:
        Layout(tp=8, cp=3, pp=2).for_world(128)
    assert raised.value.field == "Layout.dp" and raised.value.have is None
    assert raised.value.hint == "world(128) % (tp(8) * cp(3) * pp(2)) = 32"
