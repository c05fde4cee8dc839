"""Both entry points keep an OPA-style decision log, and the public names the messages point to exist."""

from __future__ import annotations

import pytest

import advisor

H100_64 = {"gpu": "H100-SXM-80GB", "gpus": 64}
T8K = {"seq_len": 8192, "global_batch_size": 512}


def test_audit_returns_a_trace_like_recommend():
    report = advisor.audit(H100_64, "llama-3-70b", advisor.Layout(tp=16, pp=3, vpp=2), T8K)
    trace = report.trace
    assert trace.decision == "audit"
    assert trace.input["layout"] == report.layout.id and advisor.Layout.parse(report.layout.id) == report.layout
    assert trace.input["cluster"] == "64 x H100-SXM-80GB" and trace.input["model"] == "llama-3-70b"
    assert trace.result == {"ok": False, "errors": [f.rule_id for f in report.errors],
                            "warnings": [f.rule_id for f in report.warnings]}
    # every finding comes from a rule the log shows firing, with the same message
    fired = {e.rule_id: e for e in trace.events if e.op == "fire"}
    for finding in report.findings:
        assert fired[finding.rule_id].message == finding.message
        assert [x.value for x in fired[finding.rule_id].effects] == [finding.severity]
    assert (report.advisor_version, report.engine, report.ruleset_revision) == (
        trace.advisor_version, trace.engine, trace.ruleset_revision)


def test_audit_log_notes_the_training_it_assumed():
    report = advisor.audit(H100_64, "llama-3-70b", advisor.Layout(tp=8, pp=2, sp=True, zero_stage=1))
    inputs = [e.message for e in report.trace.events if e.op == "input"]
    assert any(m.startswith("training.seq_len not given: 8192 tokens") for m in inputs), inputs
    assert report.trace.result["ok"] is True


def test_recommend_log_names_decision_input_and_result():
    rec = advisor.recommend(H100_64, "llama-3-70b", T8K, assumptions={"megatron_main_grad_bytes": 2})
    assert rec.trace.decision == "recommend"
    assert rec.trace.result == {"status": "recommended", "framework": rec.framework, "layout": rec.layout.id}
    assert rec.trace.input["seq_len"] == 8192 and rec.trace.input["global_batch_size"] == 512
    assert rec.trace.input["assumptions"] == {"megatron_main_grad_bytes": 2}
    assert rec.trace.render().startswith("recommend: advisor ")


def test_rule_effects_are_data_the_summary_reads():
    rec = advisor.recommend(H100_64, "llama-3-70b", T8K)
    by_rule = {e.rule_id: e for e in rec.trace.events if e.op == "fire"}
    limit = by_rule["constraint.tp-within-nvlink-domain"].effects
    assert [(x.kind, x.field, x.bound, x.value, x.source) for x in limit] == [
        ("limit", "tp", "max", 8, "cluster.nvlink_domain")]
    chosen = [x for x in by_rule["matrix.large-model-tp-pp"].effects if x.kind == "choose"]
    assert {x.field: x.value for x in chosen} == {"framework": "megatron", "zero_stages": [1],
                                                  "strategy": "model-parallel"}
    assert rec.story().startswith("Rule matrix.large-model-tp-pp: ")


def test_assumptions_is_public_where_the_messages_say():
    assert advisor.Assumptions(hbm_efficiency=0.5).hbm_efficiency == 0.5
    assert callable(advisor.estimate)
    with pytest.raises(advisor.InputError) as err:
        advisor.recommend(H100_64, "llama-3-70b", assumptions=3)
    assert "advisor.Assumptions" in str(err.value)
    est = advisor.estimate(H100_64, "llama-3-70b", {"tp": 8, "pp": 2, "sp": True, "zero_stage": 1}, T8K,
                           advisor.Assumptions())
    assert est.assumptions == advisor.Assumptions()
