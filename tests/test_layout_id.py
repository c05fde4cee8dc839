"""`Layout.id` names one layout (traces key candidates by it) and `Layout.parse` reads it back;
`Layout.degree_formula` writes the world-size product for messages."""

from typing import get_args

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import advisor
from advisor import InputError, Layout
from advisor.inputs.layout import Framework, Offload, Recompute
from budget import examples  # tests/ is on sys.path (rootdir conftest)

MAX_DEGREE = Layout.model_json_schema()["properties"]["tp"]["maximum"]


def _count(top: int):
    """Small values often (the common case), the bounds sometimes (the long tokens)."""
    return st.one_of(st.integers(1, 16), st.sampled_from([1, top]), st.integers(1, top))


@st.composite
def layouts(draw) -> Layout:
    """Any valid Layout, every field drawn (the one cross-field rule: no device without offload)."""
    offload = draw(st.sampled_from(get_args(Offload)))
    return Layout(
        framework=draw(st.sampled_from(get_args(Framework))),
        tp=draw(_count(MAX_DEGREE)), pp=draw(_count(MAX_DEGREE)), cp=draw(_count(MAX_DEGREE)),
        ep=draw(_count(MAX_DEGREE)), vpp=draw(_count(MAX_DEGREE)),
        dp=draw(st.none() | _count(MAX_DEGREE)), etp=draw(st.none() | _count(MAX_DEGREE)),
        overlap_p2p_comm=draw(st.booleans()), sp=draw(st.booleans()),
        zero_stage=draw(st.integers(0, 3)),
        micro_batch_size=draw(_count(1 << 16)), num_microbatches=draw(st.none() | _count(1 << 24)),
        recompute=draw(st.sampled_from(get_args(Recompute))), offload=offload,
        offload_device="cpu" if offload == "none" else draw(st.sampled_from(["cpu", "nvme"])),
    )


@settings(max_examples=examples(100, thorough=500), deadline=None)
@given(layouts())
def test_parse_inverts_id(layout):
    assert Layout.parse(layout.id) == layout


@settings(max_examples=examples(100, thorough=500), deadline=None)
@given(layouts(), layouts(), st.sampled_from(list(Layout.model_fields)))
def test_layouts_that_differ_in_one_field_have_different_ids(layout, donor, field):
    """The near misses are where a lossy id collides (the old one dropped eight fields). parse
    inverting id implies injectivity already; this says it for the pairs that matter."""
    # offload and its device move together: the validator allows a device only with offload
    moved = ("offload", "offload_device") if field.startswith("offload") else (field,)
    changed = Layout(**{**layout.model_dump(exclude={"id"}), **{name: getattr(donor, name) for name in moved}})
    assume(changed != layout)
    assert changed.id != layout.id, (layout, changed)


@st.composite
def edited_ids(draw) -> str:
    """An id with one character deleted, doubled or replaced: mostly malformed, sometimes another id."""
    text = draw(layouts()).id
    at = draw(st.integers(0, len(text) - 1))
    edit = draw(st.sampled_from(["delete", "double", "replace"]))
    if edit == "delete":
        return text[:at] + text[at + 1:]
    if edit == "double":
        return text[:at] + text[at] + text[at:]
    return text[:at] + draw(st.sampled_from("tpcedvzrsmbn0123456789?-/:+@")) + text[at + 1:]


@settings(max_examples=examples(100, thorough=500), deadline=None)
@given(st.text(alphabet="tpcedvzrosmbnfgk0123456789?-/:+@", max_size=40) | edited_ids())
def test_whatever_parse_accepts_is_an_id(text):
    """Only canonical ids parse, so no two strings name one layout."""
    try:
        layout = Layout.parse(text)
    except InputError as error:
        assert error.field == "layout id" and error.have == text and error.hint
    else:
        assert layout.id == text


@pytest.mark.parametrize("layout, expected", [
    (Layout(tp=8, pp=2, dp=4, zero_stage=1), "tp8-dp4-pp2-zero1"),
    (Layout(tp=1, cp=8, dp=8, zero_stage=1), "tp1-cp8-dp8-pp1-zero1"),
    (Layout(tp=2, ep=8, dp=32, vpp=4, zero_stage=1), "tp2-ep8-dp32-pp1-vpp4-zero1"),
    (Layout(tp=8, pp=2), "tp8-dp?-pp2-zero0"),
    # what the planner picks for Llama-3-70B on 64 H100s
    (Layout(tp=8, pp=2, dp=4, zero_stage=1, sp=True, num_microbatches=128), "tp8-dp4-pp2-zero1-sp-nmb128"),
    (Layout(framework="deepspeed", dp=64, zero_stage=3, offload="optimizer+params", offload_device="nvme"),
     "deepspeed/tp1-dp64-pp1-zero3-offload:optimizer+params@nvme"),
    (Layout(tp=2, ep=8, dp=32, etp=1, zero_stage=1, sp=True), "tp2-ep8-dp32-pp1-zero1-etp1-sp"),
    (Layout(tp=4, pp=4, dp=4, zero_stage=1, micro_batch_size=2, recompute="selective"),
     "tp4-dp4-pp4-zero1-mbs2-rc:selective"),
    (Layout(framework="torchtitan", tp=4, dp=64, zero_stage=1, sp=True, num_microbatches=8),
     "torchtitan/tp4-dp64-pp1-zero1-sp-nmb8"),
    (Layout(tp=8, pp=4, dp=2, vpp=5, overlap_p2p_comm=False), "tp8-dp2-pp4-vpp5-zero0-nop2poverlap"),
])
def test_readable_ids(layout, expected):
    assert layout.id == expected
    assert Layout.parse(expected) == layout


def test_the_two_layouts_the_old_id_confused_now_differ():
    megatron = Layout(tp=8, pp=2, dp=4, recompute="full", micro_batch_size=2)
    deepspeed = Layout(framework="deepspeed", tp=8, pp=2, dp=4, etp=1, offload="optimizer")
    assert megatron.id == "tp8-dp4-pp2-zero0-mbs2-rc:full"
    assert deepspeed.id == "deepspeed/tp8-dp4-pp2-zero0-etp1-offload:optimizer"


def test_etp_is_written_whenever_it_is_set():
    """etp=None means "as tp"; an explicit etp equal to tp is another field value, so another id."""
    assert Layout(tp=8, dp=1).id == "tp8-dp1-pp1-zero0"
    assert Layout(tp=8, dp=1, etp=8).id == "tp8-dp1-pp1-zero0-etp8"


@pytest.mark.parametrize("text, hint", [
    ("", "bad token '': wanted the tp token here"),
    ("tp8-pp2-zero1", "bad token 'pp2': dp is missing before it"),
    ("tp8-dp4-pp2", "the zero_stage token is missing after 'pp2'"),
    ("tp8-dp4-pp2-zero1-nmb4-sp", "bad token 'sp': sp is out of order or repeated"),
    ("tp8-dp4-pp2-zero1-sp-sp", "bad token 'sp': sp is out of order or repeated"),
    ("tp8-dp4-pp2-zero1-fsdp", "bad token 'fsdp': not a token of the grammar"),
    ("tp8-cp1-dp4-pp2-zero1", "bad token 'cp1': cp=1 is the default, written by omitting the token"),
    ("tp8-dp4-pp2-zero1-mbs1", "bad token 'mbs1': micro_batch_size=1 is the default"),
    ("tp08-dp4-pp2-zero1", "bad token 'tp08': wanted the tp token here"),
    ("tp8-dp4-pp2-zero4", "bad token 'zero4': wanted the zero_stage token here"),
    ("tp8-dp4-pp2-zero1-rc:none", "bad token 'rc:none': not a token of the grammar"),
    ("megatron/tp8-dp4-pp2-zero1", "bad token 'megatron/': the prefix is one of"),
    ("fsdp/tp8-dp4-pp2-zero1", "bad token 'fsdp/'"),
    ("tp2097152-dp4-pp2-zero1", "bad token 'tp2097152': tp: Input should be less than or equal to 1048576"),
    ("tp8-dp4-pp2-zero1-nmb99999999", "bad token 'nmb99999999': num_microbatches: Input should be less than"),
    ("tp" + "9" * 5000 + "-dp4-pp2-zero1", "tp: Input should be less than or equal to 1048576"),
])
def test_malformed_ids_name_the_bad_token(text, hint):
    with pytest.raises(InputError) as raised:
        Layout.parse(text)
    error = raised.value
    assert error.field == "layout id" and error.have == text
    assert error.want.startswith("a layout id: an optional framework prefix")
    assert hint in error.hint, error.hint


def test_parse_is_on_the_public_layout():
    assert advisor.Layout.parse("tp8-dp4-pp2-zero1") == Layout(tp=8, pp=2, dp=4, zero_stage=1)
    with pytest.raises(InputError, match="layout id"):
        Layout.parse(8)


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


def test_the_api_takes_the_id_recommend_prints_wherever_it_takes_a_layout():
    """estimate() and audit() read a layout id as compare() and the CLI do; a bad id names `layout` and the
    token."""
    import advisor
    from advisor.errors import InputError

    cluster, training = {"gpu": "H100", "gpus": 8}, {"seq_len": 4096, "global_batch_size": 64}
    layout = advisor.Layout.parse("tp8-dp1-pp1-zero1-sp-nmb64")
    assert advisor.estimate(cluster, "llama-3-8b", layout.id, training) == \
        advisor.estimate(cluster, "llama-3-8b", layout, training)
    assert advisor.audit(cluster, "llama-3-8b", "deepspeed/tp1-dp8-pp1-zero3").layout.framework == "deepspeed"
    with pytest.raises(InputError) as err:
        advisor.audit(cluster, "llama-3-8b", "tp8-pp2")
    assert err.value.field == "layout" and "pp2" in str(err.value)
