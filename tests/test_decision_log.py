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
    assert trace.input.layout == report.layout.id and advisor.Layout.parse(report.layout.id) == report.layout
    assert trace.input.cluster == "64 x H100-SXM-80GB" and trace.input.model == "llama-3-70b"
    assert trace.result.model_dump() == {"ok": False, "errors": [f.rule_id for f in report.errors],
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
    assert report.trace.result.ok is True


def test_recommend_log_names_decision_input_and_result():
    rec = advisor.recommend(H100_64, "llama-3-70b", T8K, assumptions={"megatron_main_grad_bytes": 2})
    assert rec.trace.decision == "recommend"
    assert rec.trace.result.model_dump() == {"status": "recommended", "framework": rec.framework, "layout": rec.layout.id}
    assert rec.trace.input.seq_len == 8192 and rec.trace.input.global_batch_size == 512
    assert rec.trace.input.assumptions == {"megatron_main_grad_bytes": 2}
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


def test_decision_records_link_the_rule_events_that_changed_them():
    rec = advisor.recommend(H100_64, "llama-3-70b", T8K)
    trace = rec.trace
    assert [d.name for d in trace.decisions][:1] and trace.decision_record("framework").value == "megatron"
    for record in trace.decisions:
        assert record.revision == len(record.changed_by) >= 1
        events = [trace.event(seq) for seq in record.changed_by]
        assert all(e.op == "fire" and record.name in e.changed for e in events)
        assert record.rule_id == events[-1].rule_id
    # every change a fire event names is in one record, and nothing else is
    changed = {(e.seq, name) for e in trace.events if e.op == "fire" for name in e.changed}
    assert changed == {(seq, d.name) for d in trace.decisions for seq in d.changed_by}
    tp = trace.decision_record("tp.max")
    assert (tp.value, tp.rule_id) == (8, "constraint.tp-within-nvlink-domain")


def test_a_limit_tightened_twice_has_two_revisions():
    from advisor.results.trace import TraceEvent, decision_records
    from advisor.rulebook.actions import Effect
    loose = TraceEvent(seq=1, op="fire", message="a", rule_id="r.a", changed=["tp.max"],
                       effects=[Effect(kind="limit", field="tp", bound="max", value=16)])
    tight = TraceEvent(seq=2, op="fire", message="b", rule_id="r.b", changed=["tp.max"],
                       effects=[Effect(kind="limit", field="tp", bound="max", value=8)])
    (record,) = decision_records([loose, tight])
    assert (record.value, record.revision, record.changed_by, record.rule_id) == (8, 2, [1, 2], "r.b")


def test_the_story_reads_the_records_not_the_words():
    rec = advisor.recommend({"gpu": "H100-SXM-80GB", "gpus": 8}, "mixtral-8x7b", {"seq_len": 4096, "global_batch_size": 256})
    kinds = {e.kind for e in rec.trace.events if e.op == "note"}
    assert "search" in kinds
    # notes without a kind may say anything: the story does not change
    events = [e.model_copy(update={"message": e.message + " (overrides rule x; layouts fit; stands over)"})
              if e.op == "note" and e.kind is None else e for e in rec.trace.events]
    noisy = rec.model_copy(update={"trace": rec.trace.model_copy(update={"events": events})})
    assert noisy.story() == rec.story()


def test_the_trace_json_of_before_the_records_still_reads():
    import json
    rec = advisor.recommend(H100_64, "llama-3-70b", T8K)
    data = json.loads(rec.model_dump_json())
    assert isinstance(data["trace"]["input"], dict) and "layout" not in data["trace"]["input"]
    old = dict(data, trace={k: v for k, v in data["trace"].items() if k != "decisions"})
    old["trace"]["events"] = [{k: v for k, v in e.items() if k not in ("kind", "changed")} for e in data["trace"]["events"]]
    back = advisor.Recommendation.model_validate(old)
    assert back.trace.result == rec.trace.result and back.trace.input == rec.trace.input and back.story() != ""
    assert advisor.Recommendation.model_validate_json(rec.model_dump_json()) == rec
