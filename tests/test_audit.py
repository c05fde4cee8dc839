"""audit(): every finding at once, with formulas, fixes and references; the CLI's exit status."""

import json

import pytest

import advisor
from advisor import Cluster, Layout, Training
from advisor.cli import main

H100x64 = Cluster(gpu="H100-SXM-80GB", gpus=64)
T8K = Training(seq_len=8192, global_batch_size=512)


def _ids(report, severity=None):
    return [f.rule_id for f in report.findings if severity is None or f.severity == severity]


def test_three_independent_violations_give_three_errors_in_one_call():
    report = advisor.audit(H100x64, "llama-3-70b", Layout(tp=16, pp=3, cp=3, vpp=2), T8K)
    assert set(_ids(report, "error")) == {"megatron.world-divisible-by-model-parallel",
                                          "megatron.cp-sequence-divisible", "megatron.interleaved-microbatches"}
    assert "megatron.vpp-divides-stage-layers" in _ids(report, "warning")   # 80 over 3 x 2 chunks: only a layout says it
    assert not report.ok
    world = next(f for f in report.findings if f.rule_id == "megatron.world-divisible-by-model-parallel")
    assert world.message == "world_size(64) % (tp(16) * pp(3) * cp(3)) = 64"
    assert world.fix and world.references and world.facts["check.world_mod_mp"] == 64


def test_errors_come_before_warnings_and_notes():
    report = advisor.audit(H100x64, "llama-3-70b", Layout(tp=16, pp=3, cp=3, vpp=2), T8K)
    order = [f.severity for f in report.findings]
    assert order == sorted(order, key=["error", "warning", "info"].index)


def test_a_good_megatron_layout_is_ok():
    report = advisor.audit(H100x64, "llama-3-70b", Layout(tp=8, pp=2, sp=True, zero_stage=1), T8K)
    assert report.ok and report.layout.dp == 4 and report.layout.num_microbatches == 128
    assert report.estimates.memory.fits


def test_tp_across_the_nvlink_domain_is_a_warning_with_the_formula():
    report = advisor.audit(H100x64, "llama-3-70b", Layout(tp=16, pp=4, sp=True, zero_stage=1), T8K)
    tp = next(f for f in report.findings if f.rule_id == "advice.tp-across-nvlink-domain")
    assert tp.severity == "warning" and tp.message.startswith("tp(16) > nvlink_domain(8)")


def test_deepspeed_zero3_with_pipeline_is_refused():
    report = advisor.audit(Cluster(gpu="A100-80GB", gpus=16), "llama-2-13b",
                           Layout(framework="deepspeed", pp=2, zero_stage=3), Training(seq_len=4096, global_batch_size=64))
    assert "deepspeed.zero-2-3-with-pipeline" in _ids(report, "error")
    # the same layout under Megatron is judged by Megatron's rules instead
    mg = advisor.audit(Cluster(gpu="A100-80GB", gpus=16), "llama-2-13b",
                       Layout(framework="megatron", pp=2, zero_stage=3), Training(seq_len=4096, global_batch_size=64))
    assert "deepspeed.zero-2-3-with-pipeline" not in _ids(mg)


def test_torchtitan_is_stricter_than_megatron_on_kv_heads():
    layout = dict(tp=16, pp=1, sp=True)
    titan = advisor.audit(Cluster(gpu="GB200", gpus=144), "llama-3-70b", Layout(framework="torchtitan", **layout), T8K)
    mega = advisor.audit(Cluster(gpu="GB200", gpus=144), "llama-3-70b", Layout(framework="megatron", **layout), T8K)
    assert "torchtitan.tp-divides-kv-heads" in _ids(titan, "error")
    assert "megatron.gqa-groups-vs-tp" not in _ids(mega)


def test_memory_that_does_not_fit_is_an_error():
    report = advisor.audit(H100x64, "llama-3-70b", Layout(tp=1, pp=1, zero_stage=1), T8K)
    finding = next(f for f in report.findings if f.rule_id == "layout.memory-does-not-fit")
    assert finding.severity == "error" and "GiB" in finding.message


def test_small_cluster_tp_when_zero_would_fit_is_unwise():
    report = advisor.audit(Cluster(gpu="A100-80GB", gpus=16), "llama-2-7b", Layout(tp=2, sp=True, zero_stage=1),
                           Training(seq_len=4096, global_batch_size=64))
    assert "advice.small-cluster-tp-pp-when-zero-fits" in _ids(report, "warning")


def test_pipeline_with_too_few_microbatches_states_the_bubble():
    report = advisor.audit(Cluster(gpu="H100", gpus=16384), "llama-3.1-405b", Layout(tp=8, pp=18, sp=True, zero_stage=1),
                           Training(seq_len=8192, global_batch_size=512))
    bubble = next(f for f in report.findings if f.rule_id == "advice.pipeline-bubble")
    assert "bubble" in bubble.message and "%" in bubble.message


def test_recommendations_pass_their_own_audit():
    for cluster, model in [(Cluster(gpu="A100-80GB", gpus=16), "llama-2-7b"), (H100x64, "llama-3-70b"),
                           (H100x64, "mixtral-8x7b")]:
        rec = advisor.recommend(cluster, model)
        report = advisor.audit(cluster, model, rec.layout, rec.training)
        assert report.ok, [f.line() for f in report.errors]


def test_cli_exit_status_and_json(capsys):
    assert main(["audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--tp", "16", "--pp", "3"]) == 1
    assert main(["audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--pp", "128"]) == 1
    capsys.readouterr()
    assert main(["audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--tp", "8", "--pp", "2",
                 "--sp", "--zero", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["dp"] == 4 and all(f["severity"] != "error" for f in data["findings"])


def test_bad_layout_values_name_the_field():
    with pytest.raises(ValueError, match="tp"):
        advisor.audit(H100x64, "llama-3-70b", {"tp": 0})
    with pytest.raises(ValueError, match="warp"):
        advisor.audit(H100x64, "llama-3-70b", {"tp": 8, "warp": 2})
