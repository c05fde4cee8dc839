"""Why not this layout (issue 36): `advisor.compare` / `advisor compare` set layouts beside the
advisor's pick, and the audit of a legal but wasteful layout says so, naming the faster pick."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import advisor
from advisor.cli import main
from advisor.facts import LayoutCase, Versus, build_layout_facts
from advisor.inputs.layout import Layout
from advisor.planner.ranking import NEAR_TIE

CLUSTER, MODEL = {"gpu": "H100", "gpus": 64}, "llama-3-70b"
PICK = "tp8-dp4-pp2-vpp2-zero1-sp-nmb128"   # the pick for this situation (the planner's measured near-tie band)
# The wasteful layout: TP 2 x PP 8 with full recompute runs and fits with 31.7 GiB to spare.
WASTEFUL = {"tp": 2, "pp": 8, "recompute": "full", "zero_stage": 1, "sp": True}
SITUATION = ["--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64"]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def wasteful():
    return advisor.audit(CLUSTER, MODEL, WASTEFUL, compare=True)


def test_a_wasteful_legal_layout_gets_a_warning_naming_the_pick(wasteful):
    assert wasteful.ok                                                  # legal: a warning, not an error
    (finding,) = [f for f in wasteful.findings if f.rule_id == "advice.slower-than-recommended"]
    rec = advisor.recommend(CLUSTER, MODEL)
    margin = wasteful.estimates.step_time / rec.estimates.step_time - 1
    assert finding.severity == "warning" and margin > NEAR_TIE
    assert PICK in finding.message and f"{100 * margin:.0f}% slower" in finding.message
    assert finding.facts["versus.beyond_band"] is True
    assert any(e.op == "input" and PICK in e.message for e in wasteful.trace.events)    # the decision log says it


def test_without_compare_the_audit_stays_local():
    report = advisor.audit(CLUSTER, MODEL, WASTEFUL)
    assert not any(f.rule_id == "advice.slower-than-recommended" for f in report.findings)


def test_the_pick_itself_and_its_near_ties_are_not_flagged():
    pick = advisor.audit(CLUSTER, MODEL, Layout.parse(PICK), compare=True)
    tie = advisor.audit(CLUSTER, MODEL, Layout.parse("tp8-cp2-dp2-pp2-vpp2-zero1-sp-nmb256"), compare=True)
    for report in (pick, tie):
        assert report.ok and not any(f.rule_id == "advice.slower-than-recommended" for f in report.findings)
    assert "Compared with the advisor's pick" in " ".join(tie.explain().split())


def test_an_illegal_layout_is_not_compared():
    report = advisor.audit(CLUSTER, MODEL, {"tp": 16, "pp": 3}, compare=True)
    assert not report.ok and not any("compared with" in e.message for e in report.trace.events)


def test_versus_facts_say_beyond_the_band_only_past_it():
    cluster, model = advisor.Cluster(**CLUSTER), advisor.Model.preset(MODEL)
    training = advisor.Training(seq_len=8192, global_batch_size=512)
    layout = Layout.parse(PICK)
    for step, beyond in ((100.0 * (1 + NEAR_TIE) - 0.01, False), (100.0 * (1 + NEAR_TIE) + 0.01, True)):
        facts = build_layout_facts(LayoutCase(cluster, model, training, layout,
                                              versus=Versus(pick="x", pick_step=100.0, step=step, band=NEAR_TIE)))
        assert facts["versus"]["beyond_band"] is beyond and facts["versus"]["compared"] is True
    assert build_layout_facts(LayoutCase(cluster, model, training, layout))["versus"]["compared"] is False


def test_cli_audit_compares_by_default():
    code, out, _ = run(["audit", *SITUATION, "--tp", "2", "--pp", "8", "--recompute", "full", "--zero", "1", "--sp"])
    flat = " ".join(out.split())
    assert code == 0 and "WARNING advice.slower-than-recommended" in flat and PICK in flat
    code, out, _ = run(["audit", *SITUATION, "--tp", "2", "--pp", "8", "--recompute", "full", "--zero", "1", "--sp",
                        "--no-compare", "--json"])
    assert code == 0 and json.loads(out)["ok"] is True and "slower-than" not in out


def test_compare_sets_layouts_beside_the_pick():
    result = advisor.compare(CLUSTER, MODEL, ["tp2-dp4-pp8-zero1-sp-rc:full", "tp8-cp2-dp2-pp2-vpp2-zero1-sp-nmb256",
                                              "tp16-dp4-pp1-zero1", PICK])
    pick, wasteful, tie, refused = result.layouts                        # the pick once, first
    assert pick.pick and pick.layout.id == PICK and pick.verdict.startswith("the advisor's pick")
    assert wasteful.slower_than_pick > NEAR_TIE and f"beyond the {NEAR_TIE:.0%} tie band" in wasteful.verdict
    rec = advisor.recommend(CLUSTER, MODEL)
    assert tie.verdict == next(a.reason for a in rec.alternatives if a.layout.id == tie.layout.id)
    assert not refused.ok and refused.verdict.startswith("refused by ")
    assert type(result).model_validate_json(result.model_dump_json()) == result


def test_cli_compare_reads_ids_as_recommend_prints_them():
    code, out, _ = run(["compare", *SITUATION, "megatron", "tp2-dp4-pp8-zero1-sp-rc:full",
                        "deepspeed", "tp1-dp64-pp1-zero3-mbs2-nmb4-rc:full"])
    lines = out.splitlines()
    assert code == 0 and f"A  megatron {PICK}  (the advisor's pick)" in lines
    assert "C  deepspeed/tp1-dp64-pp1-zero3-mbs2-nmb4-rc:full" in lines
    assert max(map(len, lines)) <= 80
    for label in ("memory per GPU", "step", "MFU (BF16 peak)", "tp comm", "dp comm"):
        assert any(line.startswith(label) for line in lines), label
    code, out, _ = run(["compare", *SITUATION, "tp2-dp4-pp8-zero1-sp-rc:full", "--json"])
    assert code == 0 and [row["layout"]["id"] for row in json.loads(out)["layouts"]][0] == PICK
    code, _out, err = run(["compare", *SITUATION, "tp2-dq4"])
    assert code == 2 and "LAYOUT_ID" in err and "'dq4'" in err
    code, out, err = run(["compare", *SITUATION, PICK, "--format", "megatron"])
    assert code == 2 and out == "" and "--format" in err
