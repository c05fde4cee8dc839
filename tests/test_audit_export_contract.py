"""One owner of legality: the audit rules. A layout `advisor.audit` calls ok (no error finding)
exports without error in every format of its framework, and every refusal an exporter still makes
is the assertion of an audit rule that fired (architecture review §3.3, rule 1).

Formats per framework, as the configs are meant to be run: Megatron-LM flags for "megatron" and
"megatron+deepspeed" (Megatron-DeepSpeed takes the model and TP/PP flags), the DeepSpeed JSON for
"deepspeed" and "megatron+deepspeed", the torchtitan TOML for "torchtitan". (The CLI writes any
format for any layout; outside these pairs the audit has judged the layout for another framework.)

The three bugs this contract was written against: BLOOM (ALiBi) recommended on Megatron-LM, whose
exporter refused it; torchtitan etp 2 with tp 4 passing the audit and failing the export; RoPE
models refused by the audit past max_position although the Megatron export writes the longer table.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor import export as ex
from situations import situations  # tests/ is on sys.path (rootdir conftest)
from budget import examples  # tests/ is on sys.path (rootdir conftest)

FORMATS = {
    "megatron": (ex.megatron_args,),
    "megatron+deepspeed": (ex.megatron_args, ex.deepspeed_config),
    "deepspeed": (ex.deepspeed_config, ex.accelerate_config, ex.trl_config),
    "torchtitan": (ex.torchtitan_toml, ex.torchtitan_args),
}

# Audit rules whose refusal the exporters assert exactly: when one of them errors, an exporter of the
# framework must refuse too (else the audit refuses what the framework runs: bug 3).
MIRRORED = {
    "megatron.no-alibi", "megatron.max-position-covers-sequence", "megatron.offload-optimizer-to-cpu-only",
    "megatron.virtual-stage-needs-a-layer", "deepspeed.zero-2-3-with-pipeline", "deepspeed.param-offload-needs-zero3",
    "deepspeed.nvme-offload-needs-zero3", "deepspeed.optimizer-offload-needs-zero", "torchtitan.etp-is-1-or-tp",
    "torchtitan.no-fp16", "torchtitan.offload-needs-fsdp-on-cpu", "torchtitan.virtual-stages-split",
    "megatron.rotary-base-integer", "megatron.rope-scaling-kind", "megatron.ep-a2a-overlap-needs",
    "megatron.fp8-param-gather-needs-sharded-optimizer", "megatron.fp8-param-gather-offload-delayed",
    "megatron.activation-offload-layers", "megatron.main-grad-bytes", "megatron.optimizer-state-bytes",
    "deepspeed.ulysses-heads-divisible-by-cp", "torchtitan.ddp-is-one-dimensional", "torchtitan.experts-have-no-tp",
    "megatron-deepspeed.model-code", "megatron-deepspeed.no-megatron-moe", "megatron-deepspeed.fp8-te-layer",
    "megatron-deepspeed.ulysses-not-with-sequence-parallel", "megatron-deepspeed.run-settings",
    "megatron-deepspeed.no-adapters", "megatron.qlora-no-4bit-base", "torchtitan.adapters",
    "megatron.lora-named-precision-recipe", "layout.cuda-graphs-need-megatron",
}

MODELS = ("llama-3-8b", "llama-2-7b", "qwen2.5-7b", "mixtral-8x7b", "qwen3-30b-a3b", "bloom-176b", "gpt-3-5b",
          "gpt-3-20b", "llama-3-70b", "smollm3-3b")
REFUSAL = "forbidden by audit rule "


@st.composite
def layouts(draw, cluster: Cluster, model: Model) -> Layout:
    """A layout whose degrees tile the cluster (dp derived), every other field drawn freely."""
    gpus = cluster.gpus
    tp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if gpus % d == 0]))
    pp = draw(st.sampled_from([d for d in (1, 2, 3, 4, 8) if (gpus // tp) % d == 0]))
    cp = draw(st.sampled_from([d for d in (1, 2, 4) if (gpus // tp // pp) % d == 0]))
    offload = draw(st.sampled_from(["none", "none", "none", "optimizer", "optimizer+params"]))
    return Layout(
        framework=draw(st.sampled_from(sorted(FORMATS))), tp=tp, pp=pp, cp=cp,
        ep=draw(st.sampled_from([1, 2, 4, 8] if model.is_moe else [1, 1, 1, 2])),
        etp=draw(st.sampled_from([None, 1, 2, tp])), vpp=draw(st.sampled_from([1, 1, 1, 2, 3, 5, 8])),
        sp=draw(st.booleans()) and tp > 1, zero_stage=draw(st.integers(0, 3)),
        micro_batch_size=draw(st.sampled_from([1, 2])), recompute=draw(st.sampled_from(["none", "selective", "full"])),
        offload=offload, offload_device=draw(st.sampled_from(["cpu", "nvme"])) if offload != "none" else "cpu",
    )


# Run settings of the estimate the exporters must write or refuse (advisor.export.megatron.ASSUMPTIONS_IN_FLAGS)
ASSUMED = [None, {"ep_a2a_overlap": True}, {"fp8_param_gather": True}, {"activation_offload_layers": 40},
           {"moe_token_dispatcher": "deepep"}, {"megatron_optimizer_bytes": 4.0}, {"megatron_main_grad_bytes": 2.0},
           {"tp_comm_overlap": True}]


def _export_errors(report, assumptions=None) -> list[advisor.InputError]:
    errors = []
    for export in FORMATS[report.layout.framework]:
        try:
            export(report.layout, report.model, report.training, report.cluster, advisor.Assumptions(**assumptions or {}))
        except advisor.InputError as e:
            errors.append(e)
    return errors


@settings(max_examples=examples(250, thorough=1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_audit_ok_exports_and_every_refusal_is_an_audit_rule(data):
    cluster, model, training = data.draw(situations(
        models=MODELS, sizes=(8, 16, 32, 64, 128, 256), seqs=(2048, 4096, 8192, 16384, 32768),
        batches=(256, 512, 1024)))
    precision = data.draw(st.sampled_from(["bf16", "bf16", "fp16", "fp8"]))
    task = data.draw(st.sampled_from(["pretrain", "pretrain", "pretrain", "lora", "qlora"]))
    graphs = data.draw(st.sampled_from([False, False, False, True]))
    training = training.model_copy(update={"precision": precision, "task": task, "cuda_graphs": graphs})
    assumed = data.draw(st.sampled_from(ASSUMED))
    report = advisor.audit(cluster, model, data.draw(layouts(cluster, model)), training, assumptions=assumed)
    errors = {f.rule_id for f in report.errors}
    refusals = _export_errors(report, assumed)
    if report.ok:
        assert not refusals, f"audit ok, export refused: {[str(e) for e in refusals]}"
    for e in refusals:           # an exporter's refusal names a rule, and that rule fired
        if e.hint and e.hint.startswith(REFUSAL):
            rule = e.hint[len(REFUSAL):].split(":")[0]
            assert rule in errors, f"{rule} not among the audit's errors {sorted(errors)}: {e}"
    if errors & MIRRORED:        # and the rules the exporters mirror are refused there too
        assert refusals, f"audit refuses with {sorted(errors & MIRRORED)}, the export accepts"


# --- the three reported cases: what recommend answers, and that it exports -------------------------

def _exports(rec) -> None:
    assert rec.status == "recommended", rec.explain()
    for export in FORMATS[rec.layout.framework]:
        export(rec.layout, rec.model, rec.training, rec.cluster)


@pytest.mark.parametrize("gpus", [64, 384])
def test_bloom_gets_a_layout_it_can_run(gpus):
    """BLOOM-176B (ALiBi): never a Megatron-LM layout (megatron.no-alibi), but Megatron-DeepSpeed,
    whose BigScience fork trained it, with --position-embedding-type alibi; on 384 GPUs the global
    batch does not divide over the ZeRO ranks, and the search widens on Megatron-DeepSpeed too."""
    rec = advisor.recommend(Cluster(gpu="A100-80GB", gpus=gpus), "bloom-176b")
    assert rec.status == "recommended" and rec.framework == "megatron+deepspeed"
    _exports(rec)
    assert "--position-embedding-type alibi" in " ".join(ex.megatron_args(rec.layout, rec.model, rec.training,
                                                                          rec.cluster))
    report = advisor.audit(rec.cluster, rec.model, Layout(tp=8, pp=8, zero_stage=1), rec.training)
    assert "megatron.no-alibi" in {f.rule_id for f in report.errors}
    zero3 = advisor.audit(rec.cluster, rec.model, Layout(framework="deepspeed", dp=gpus, zero_stage=3), rec.training)
    assert "megatron.no-alibi" not in {f.rule_id for f in zero3.findings}


def test_torchtitan_etp_between_1_and_tp_is_an_audit_error():
    """The review's case: Mixtral on torchtitan with tp 4, ep 8, etp 2 passed the audit."""
    mix, training = "mixtral-8x7b", Training(seq_len=4096, global_batch_size=512)
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=64)
    bad = advisor.audit(cluster, mix, Layout(framework="torchtitan", tp=4, ep=8, etp=2, zero_stage=3), training)
    assert "torchtitan.etp-is-1-or-tp" in {f.rule_id for f in bad.errors}
    # torchtitan main has no expert TP: etp = tp is refused too, etp = 1 borrows EP from dp_shard x cp x tp
    same = advisor.audit(cluster, mix, Layout(framework="torchtitan", tp=4, ep=8, zero_stage=3), training)
    one = advisor.audit(cluster, mix, Layout(framework="torchtitan", tp=4, ep=8, etp=1, zero_stage=3), training)
    assert "torchtitan.experts-have-no-tp" in {f.rule_id for f in same.errors}
    assert not {f.rule_id for f in one.errors} & {"torchtitan.ep-borrows-fsdp-and-tp", "torchtitan.experts-have-no-tp"}
    # ZeRO-1 exports as FSDP (data_parallel_shard_degree = dp), so it lends EP ranks as ZeRO-3 does
    fsdp1 = advisor.audit(cluster, mix, Layout(framework="torchtitan", tp=4, ep=8, etp=1, zero_stage=1), training)
    assert not {f.rule_id for f in fsdp1.errors} & {"torchtitan.ep-borrows-fsdp-and-tp"}
    # ZeRO-0 is DDP, which torchtitan runs one-dimensional only
    ddp = advisor.audit(cluster, mix, Layout(framework="torchtitan", tp=4, ep=8, etp=1, zero_stage=0), training)
    assert "torchtitan.ddp-is-one-dimensional" in {f.rule_id for f in ddp.errors}
    assert one.ok and fsdp1.ok
    for report in (one, fsdp1):
        ex.torchtitan_toml(report.layout, report.model, report.training, report.cluster)
        ex.torchtitan_args(report.layout, report.model, report.training, report.cluster)


def test_llama3_8b_at_16k_is_a_context_extension_not_infeasible():
    rec = advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-8b", {"seq_len": 16384})
    assert rec.framework == "megatron"
    _exports(rec)
    assert "--max-position-embeddings 16384" in ex.megatron_command(rec.layout, rec.model, rec.training, rec.cluster)
    notes = [f for f in rec.findings if f.rule_id == "megatron.rope-context-extension"]
    assert len(notes) == 1 and notes[0].severity == "info"


def test_an_alibi_model_on_megatron_deepspeed_is_written_for_bigscience_fork():
    """ALiBi runs on BigScience's Megatron-DeepSpeed (754cf21), whose parser has no --sequence-parallel, no
    --normalization, no FlashAttention flag and no --recompute-granularity (its full recompute is
    --checkpoint-activations): the plan keeps SP off, the audit refuses it, the command has none of them."""
    cluster = Cluster(gpu="A100-80GB", gpus=64)
    rec = advisor.recommend(cluster, "bloom-176b")
    assert rec.framework == "megatron+deepspeed" and not rec.layout.sp
    assert "megatron-deepspeed.alibi-no-flash-attention" in {f.rule_id for f in rec.findings}
    args = ex.megatron_args(rec.layout, rec.model, rec.training, rec.cluster)
    assert not {"--sequence-parallel", "--normalization", "--use-flash-attn-v2", "--recompute-granularity"} & set(args)
    assert ("--checkpoint-activations" in args) == (rec.layout.recompute == "full")
    with_sp = advisor.audit(cluster, rec.model, rec.layout.model_copy(update={"sp": True}), rec.training)
    assert "megatron-deepspeed.alibi-bigscience-fork" in {f.rule_id for f in with_sp.errors}
    with pytest.raises(advisor.InputError, match="megatron-deepspeed.alibi-bigscience-fork"):
        ex.megatron_args(with_sp.layout, rec.model, rec.training, rec.cluster)     # the export refuses it too
