"""Fine-tuning jobs (issue 18): Training.task and the LoRA settings, the frozen-base memory and time
terms (advisor.costmodel.adapters), the rules, and the property tests the issue asks for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import estimate
from advisor.costmodel.adapters import NF4_BITS_PER_PARAM, model_adapter_params
from advisor.errors import InputError
from advisor.inputs.coerce import as_training
from advisor.inputs.specs import resolve_training

H100x8 = Cluster(gpu="H100", gpus=8)
LLAMA8B = Model.preset("llama-3-8b")
LLAMA70B = Model.preset("llama-3-70b")


def _train(task, **kw):
    return Training(task=task, seq_len=kw.pop("seq_len", 4096), global_batch_size=kw.pop("gbs", 64), **kw)


def _est(task, layout=None, model=LLAMA8B, cluster=H100x8, **kw):
    layout = layout or Layout(framework="megatron", tp=1, pp=1, dp=8, zero_stage=1, micro_batch_size=1)
    return estimate(cluster, model, layout, _train(task, **kw))


# ----------------------------------------------------------------------------- inputs

def test_lora_defaults_are_filled_and_named_in_the_notes():
    t, notes = resolve_training(LLAMA8B, Training(task="lora"))
    assert (t.lora_rank, t.lora_alpha, t.lora_targets) == (16, 32, ("qkv", "proj", "fc1", "fc2"))
    assert t.seq_len == 4096 and t.global_batch_size == 128
    assert any("lora_rank not given: 16" in n for n in notes)


@pytest.mark.parametrize("fields, field", [
    ({"task": "sft", "lora_rank": 8}, "Training.lora_rank"),
    ({"task": "pretrain", "lora_targets": ("qkv",)}, "Training.lora_targets"),
    ({"task": "lora", "lora_targets": ("qkv", "qkv")}, "Training.lora_targets"),
    ({"task": "lora", "lora_targets": ()}, "Training.lora_targets"),
])
def test_inconsistent_lora_settings_name_the_field(fields, field):
    with pytest.raises(InputError) as exc:
        as_training(fields)
    assert exc.value.field == field


def test_unknown_task_and_target_are_refused_by_field():
    with pytest.raises(InputError, match="training.task"):
        as_training({"task": "rlhf"})
    with pytest.raises(InputError, match="training.lora_targets"):
        as_training({"task": "lora", "lora_targets": ["query_key_value"]})


def test_rank_above_hidden_is_refused():
    with pytest.raises(InputError, match="lora_rank"):
        resolve_training(Model.preset("llama-2-7b"), Training(task="lora", lora_rank=8192))


# ----------------------------------------------------------------------------- memory

def test_lora_adapter_count_is_r_times_in_plus_out():
    # Llama 3 8B: h 4096, q 4096, k = v 1024, f 14336 (SwiGLU: fc1 out 2f); rank 16
    h, f = 4096, 14336
    per_layer = (h + 4096 + 2 * 1024) + (4096 + h) + (h + 2 * f) + (f + h)
    assert model_adapter_params(LLAMA8B, 16, ("qkv", "proj", "fc1", "fc2")) == 16 * 32 * per_layer


def test_frozen_base_keeps_16bit_weights_and_only_adapter_states():
    full, lora = _est("sft"), _est("lora")
    adapters = model_adapter_params(LLAMA8B, 16, ("qkv", "proj", "fc1", "fc2"))
    # zero 1 (distributed optimizer): fp32 main grads 4 B replicated, optimizer 12 B over dp 8
    assert lora.memory.gradients == pytest.approx(4 * adapters, rel=0.01)
    assert lora.memory.optimizer == pytest.approx(12 * adapters / 8, rel=0.01)
    assert lora.memory.weights == pytest.approx(full.memory.weights + 2 * adapters, rel=0.01)
    assert lora.memory.total < 0.5 * full.memory.total


def test_qlora_stores_linears_in_nf4():
    assert NF4_BITS_PER_PARAM == pytest.approx(4.127, abs=1e-3)   # QLoRA §3
    lora, qlora = _est("lora"), _est("qlora")
    pc = advisor.inputs.architecture.count_parameters(LLAMA8B)
    linear = LLAMA8B.layers * (pc.attention + pc.dense_mlp)
    saved = linear * (2.0 - NF4_BITS_PER_PARAM / 8)
    assert lora.memory.weights - qlora.memory.weights == pytest.approx(saved, rel=0.01)


def test_zero3_shards_the_frozen_weights():
    z3 = Layout(framework="deepspeed", tp=1, pp=1, dp=8, zero_stage=3, micro_batch_size=1, recompute="full")
    e = _est("lora", z3, model=LLAMA70B)
    assert e.memory.weights < 70e9 * 2 / 8 * 1.1
    assert e.memory.fits


# ----------------------------------------------------------------------------- time

def test_frozen_base_skips_the_weight_gradient_gemms():
    full, lora = _est("sft"), _est("lora")
    assert lora.compute_time < full.compute_time
    # linear GEMMs fall from 3x to 2x forward; attention keeps 3x: between 2/3 and 1 of the compute
    assert 2 / 3 < lora.compute_time / full.compute_time < 0.9
    # model FLOPs as NeMo counts LoRA: 2x frozen linears (NeMo 24.07 7B LoRA/SFT rows: 26.7 / 39.8 GF)
    assert 0.66 < lora.model_flops / full.model_flops < 0.75


def test_qlora_pays_dequantisation():
    assert _est("qlora").compute_time > _est("lora").compute_time


def test_lora_gradient_traffic_is_the_adapters_only():
    dp0 = Layout(framework="megatron", tp=1, pp=1, dp=8, zero_stage=0, micro_batch_size=1)
    assert _est("lora", dp0).comm.dp.bytes < 0.05 * _est("sft", dp0).comm.dp.bytes


# ----------------------------------------------------------------------------- properties

_LAYOUTS = [
    Layout(framework="megatron", tp=1, pp=1, dp=8, zero_stage=0, micro_batch_size=1, recompute="full"),
    Layout(framework="megatron", tp=2, pp=2, dp=2, zero_stage=1, micro_batch_size=1, sp=True),
    Layout(framework="megatron", tp=1, pp=1, dp=8, zero_stage=3, micro_batch_size=1),
    Layout(framework="deepspeed", tp=1, pp=1, dp=8, zero_stage=2, micro_batch_size=1),
    Layout(framework="deepspeed", tp=1, pp=1, dp=8, zero_stage=3, micro_batch_size=1, offload="optimizer"),
    Layout(framework="torchtitan", tp=2, pp=1, dp=4, zero_stage=3, micro_batch_size=1),
]


@settings(max_examples=40, deadline=None)
@given(layout=st.sampled_from(_LAYOUTS), task=st.sampled_from(["lora", "qlora"]),
       r=st.integers(1, 512), targets=st.sets(st.sampled_from(["qkv", "proj", "fc1", "fc2"]), min_size=1))
def test_adapter_rank_up_means_memory_up(layout, task, r, targets):
    tg = tuple(sorted(targets))
    lo = _est(task, layout, lora_rank=r, lora_targets=tg).memory
    hi = _est(task, layout, lora_rank=2 * r, lora_targets=tg).memory
    assert hi.total > lo.total
    assert hi.optimizer + hi.offloaded_to_host > lo.optimizer + lo.offloaded_to_host


@settings(max_examples=40, deadline=None)
@given(layout=st.sampled_from(_LAYOUTS), task=st.sampled_from(["lora", "qlora"]), r=st.integers(1, 256))
def test_frozen_base_has_no_base_optimizer_states(layout, task, r):
    """Whatever the layout, the optimizer (on the GPU or offloaded) holds the adapters' states only:
    at most the full-training bytes per parameter times the adapters on the rank."""
    e = _est(task, layout, lora_rank=r)
    adapters = model_adapter_params(LLAMA8B, r, ("qkv", "proj", "fc1", "fc2"))
    opt = e.memory.optimizer + e.memory.offloaded_to_host
    assert opt <= 16 * adapters / (layout.tp * layout.pp) * 1.01 + 1
    full = _est("sft", layout)
    assert opt < 0.1 * (full.memory.optimizer + full.memory.offloaded_to_host)


# ----------------------------------------------------------------------------- rules and answers

def test_lora_70b_one_node_is_explained_with_the_frozen_base_rule():
    rec = advisor.recommend(H100x8, "llama-3-70b", {"task": "lora"})
    text = rec.explain()
    assert "matrix.lora-one-node-shard-frozen-base" in text
    assert "full SFT would need" in text
    assert rec.memory.fits


def test_qlora_8b_on_one_24gb_gpu():
    rec = advisor.recommend(Cluster(gpu="L4", gpus=1), "llama-3-8b", {"task": "qlora"})
    assert "matrix.qlora-single-gpu" in rec.explain()
    assert rec.memory.fits and rec.layout.tp == rec.layout.pp == 1


def test_lora_405b_on_32_h100_says_what_full_sft_would_need():
    # 405B LoRA: the frozen base (765 GiB) outgrows a node but fits 32 GPUs; full SFT's states do not
    rec = advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=32), "llama-3.1-405b", {"task": "lora"})
    text = rec.explain()
    assert "matrix.frozen-base-beyond-one-node" in text
    assert "full fine-tuning, which would need" in text
    assert rec.memory.fits and rec.memory.optimizer < 0.01 * rec.memory.weights


def test_full_sft_8b_on_8_a100_40gb_is_sharded_or_split_and_fits():
    rec = advisor.recommend(Cluster(gpu="A100-40GB", gpus=8), "llama-3-8b", {"task": "sft"})
    assert rec.memory.fits
    layout = rec.layout
    assert layout.zero_stage >= 1 or layout.tp * layout.pp > 1     # 135 GiB of states cannot sit on one GPU
    assert "matrix.small-cluster-tight-memory" in rec.explain()


def test_pretraining_facts_do_not_change_with_the_new_fields():
    from advisor.facts import build_facts
    t, _ = resolve_training(LLAMA70B, Training())
    f = build_facts(H100x8, LLAMA70B, t)
    assert f["sizing"]["states_gib"] == f["sizing"]["full_states_gib"]
    assert f["training"]["frozen_base"] is False


# --- sequence packing ------------------------------------------------------------------------------

def test_packed_samples_attend_only_themselves():
    # block-diagonal attention over 256-token samples packed into 4096: attention FLOPs drop, GEMMs do not
    cluster = advisor.Cluster(gpu="H100-SXM-80GB", gpus=8)
    layout = advisor.Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=1)
    base = dict(task="sft", seq_len=4096, global_batch_size=64)
    plain = advisor.estimate(cluster, "llama-2-13b", layout, advisor.Training(**base))
    packed = advisor.estimate(cluster, "llama-2-13b", layout, advisor.Training(**base, packed_sample_tokens=256))
    assert packed.compute_time < plain.compute_time
    assert packed.compute_time > 0.7 * plain.compute_time          # the linear layers are unchanged
    longer = advisor.estimate(cluster, "llama-2-13b", layout, advisor.Training(**base, packed_sample_tokens=8192))
    assert longer.compute_time == plain.compute_time                 # samples as long as the sequence: no change


def test_packed_sample_tokens_is_checked_by_field():
    with pytest.raises(Exception) as err:
        advisor.Training(packed_sample_tokens=0)
    assert "packed_sample_tokens" in str(err.value)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["pretrain", "sft", "lora", "qlora"]), st.sampled_from(["llama-3-8b", "mixtral-8x7b"]),
       st.sampled_from([1, 2, 8]), st.sampled_from(["none", "full"]))
def test_parameter_offload_moves_the_weights_it_holds_and_no_term_goes_negative(task, model, dp, recompute):
    """ZeRO-3 parameter offload moves the rank's weight shards to the host, as they are stored (the NF4 base
    under QLoRA): the GPU's weights plus what it moves equal the weights kept without it, and no memory
    term is negative (QLoRA once moved the base at 16-bit width: -47 GiB of weights on two RTX 4090s)."""
    cluster = Cluster(gpu="H100", gpus=dp)
    training = Training(task=task, seq_len=2048, global_batch_size=16)
    mem = {off: estimate(cluster, model, Layout(framework="deepspeed", dp=dp, zero_stage=3, offload=off,
                                                recompute=recompute), training).memory
           for off in ("optimizer", "optimizer+params")}
    kept, moved = mem["optimizer"], mem["optimizer+params"]
    for m in (kept, moved):
        assert min(m.weights, m.gradients, m.optimizer, m.activations, m.buffers, m.offloaded_to_host) >= 0.0
    assert moved.weights + (moved.offloaded_to_host - kept.offloaded_to_host) == pytest.approx(kept.weights, rel=1e-9)


def test_a_single_gpu_job_the_rules_zero_stages_cannot_hold_gets_zero3_offload():
    """QLoRA of a 70B model on one 48 GiB GPU: the rules choose no sharding (the NF4 base fits the GPU), but
    with its activations nothing fits at that stage, and one GPU has no model parallelism to widen to. The
    planner then tries the ZeRO stages beyond the rules' choice, with offload, and says so (it answered
    "infeasible" while ZeRO-3 with parameter offload fits in 43 GiB)."""
    rec = advisor.recommend(Cluster(gpu="L40S", gpus=1), LLAMA70B, {"task": "qlora"})
    assert rec.status == "recommended"
    assert (rec.layout.zero_stage, rec.layout.offload) == (3, "optimizer+params")
    assert rec.estimates.memory.fits and not [f for f in rec.findings if f.severity == "error"]
    notes = [e.message for e in rec.trace.events if e.op == "note"]
    assert any(m.startswith("no layout fits with ZeRO stages 0 (the rules' choice) or with model parallelism") for m in notes)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["L40S", "A100-40GB", "RTX-4090", "H100"]), st.sampled_from(["llama-3-8b", "llama-3-70b"]),
       st.sampled_from(["sft", "lora", "qlora"]))
def test_one_gpu_is_never_infeasible_when_zero3_with_offload_fits(gpu, model, task):
    cluster = Cluster(gpu=gpu, gpus=1)
    rec = advisor.recommend(cluster, model, {"task": task})
    training = rec.training
    offloaded = estimate(cluster, model, Layout(framework="deepspeed", zero_stage=3, offload="optimizer+params",
                                                recompute="full"), training).memory
    if offloaded.fits and offloaded.host_fits:
        assert rec.status == "recommended", (gpu, model, task)
