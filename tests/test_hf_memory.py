"""The Hugging Face stacks' memory (issue 31): the optimizer and master-weight inputs, PEFT's target names,
transformers' and PEFT's kept tensors, the step's peak, and that no other stack moves."""

from __future__ import annotations

import json

import pytest

import advisor
from advisor.costmodel import Assumptions, estimate
from advisor.costmodel.adapters import model_adapter_params
from advisor.errors import InputError
from advisor.export.hf import peft_config
from advisor.inputs.coerce import as_training
from advisor.inputs.layout import Layout

H200 = advisor.Cluster(gpu="H200", gpus=1)
LLAMA8B = advisor.Model.preset("llama-3-8b")
PLAIN = dict(framework="torchtitan", tp=1, pp=1, dp=1, zero_stage=0)   # one GPU, no DeepSpeed or FSDP
GIB = 2**30


def _train(**kw) -> advisor.Training:
    base = dict(seq_len=2048, global_batch_size=1, micro_batch_size=1, framework="hf-trl")
    return advisor.Training(**(base | kw))


def _mem(training, recompute="none", mbs=1, assumptions=None, layout=PLAIN, cluster=H200, model=LLAMA8B):
    lay = Layout(**layout, micro_batch_size=mbs, recompute=recompute)
    return estimate(cluster, model, lay, training, assumptions).memory


@pytest.mark.parametrize("fields, field", [
    ({"optimizer": "adam8"}, "training.optimizer"),
    ({"master_weights": "bf16"}, "training.master_weights"),
    ({"master_weights": "none", "precision": "fp16"}, "Training.master_weights"),
    ({"lora_dropout": 0.1}, "Training.lora_dropout"),
    ({"task": "lora", "lora_dropout": 1.0}, "training.lora_dropout"),
    ({"task": "lora", "lora_targets": ["qkv", "o_proj"]}, "Training.lora_targets"),
    ({"task": "lora", "lora_targets": ["all-linear", "q_proj"]}, "Training.lora_targets"),
])
def test_bad_optimizer_master_and_lora_settings_name_the_field(fields, field):
    with pytest.raises(InputError) as exc:
        as_training(fields)
    assert exc.value.field == field


def test_peft_all_linear_is_the_measured_trainable_count():
    # realruns.jsonl (measured-h200-2026-12), Llama-3-8B, r 16 on the seven projections: 41,943,040
    assert model_adapter_params(LLAMA8B, 16, ("all-linear",)) == 41_943_040
    seven = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert model_adapter_params(LLAMA8B, 16, seven) == 41_943_040
    # separate q/k/v and gate/up adapters each read the layer input: more than one fused adapter
    assert model_adapter_params(LLAMA8B, 16, ("qkv", "proj", "fc1", "fc2")) < 41_943_040


def test_hf_stack_defaults_to_peft_modules_and_prices_fused_names_as_peft_builds_them():
    r = advisor.recommend(H200, LLAMA8B, advisor.Training(task="lora", framework="hf-trl"))
    assert r.training.lora_targets == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    fused = _mem(_train(task="lora", lora_targets=("qkv", "proj", "fc1", "fc2")))
    seven = _mem(_train(task="lora", lora_targets=("all-linear",)))
    assert fused.total == seven.total


@pytest.mark.parametrize("framework", ["megatron", "deepspeed", "torchtitan"])
def test_adam_with_fp32_master_is_the_default_everywhere(framework):
    lay = dict(framework=framework, tp=1, pp=1, dp=8, zero_stage=1)
    cluster = advisor.Cluster(gpu="H100", gpus=8)
    t = advisor.Training(seq_len=4096, global_batch_size=64)
    explicit = advisor.Training(seq_len=4096, global_batch_size=64, optimizer="adam", master_weights="fp32")
    assert _mem(t, layout=lay, cluster=cluster) == _mem(explicit, layout=lay, cluster=cluster)


def test_state_bytes_per_optimizer_on_one_gpu():
    n = LLAMA8B.params

    def states(**kw) -> float:
        m = _mem(_train(task="sft", optimizer=kw.pop("optimizer", "adamw"), **kw), recompute="full")
        return (m.weights + m.optimizer + m.detail["hf_grads_after_peak"] + m.gradients) / n

    assert states() == pytest.approx(16.0, abs=0.01)                    # fp32 weights, grads, m, v
    assert states(master_weights="none") == pytest.approx(8.0, abs=0.01)   # bf16 weights, grads, m, v
    assert states(master_weights="none", optimizer="adamw-8bit") == pytest.approx(6.03, abs=0.01)
    assert states(master_weights="none", optimizer="sgd") == pytest.approx(4.0, abs=0.01)
    assert states(master_weights="none", optimizer="lion") == pytest.approx(8.0, abs=0.01)   # bnb Lion32bit
    assert states(master_weights="none", optimizer="adafactor") == pytest.approx(4.0, abs=0.01)


def test_other_stacks_keep_their_terms():
    lay = dict(framework="deepspeed", tp=1, pp=1, dp=1, zero_stage=1)
    plain = advisor.Training(seq_len=2048, global_batch_size=1, task="lora")
    stated = advisor.Training(seq_len=2048, global_batch_size=1, task="lora", framework="deepspeed")
    hf = advisor.Training(seq_len=2048, global_batch_size=1, task="lora", framework="hf-trl",
                          lora_targets=("qkv", "proj", "fc1", "fc2"))
    a, b = _mem(plain, layout=lay), _mem(stated, layout=lay)
    assert a == b and "hf_peak_phase" not in a.detail
    assert "hf_peak_phase" in _mem(hf, layout=lay).detail


def test_checkpointing_keeps_layer_inputs_and_peaks_at_the_loss_for_lora():
    t = _train(task="lora")
    full, none = _mem(t, "full"), _mem(t, "none")
    assert full.total < none.total
    assert full.detail["hf_checkpoints"] == 32 * 2 * 4096 * 2048         # each layer's bf16 input
    assert full.detail["hf_peak_phase"] == 2                               # the loss backward


def test_dropout_masks_and_adapter_copies():
    base = _mem(_train(task="lora"))
    drop = _mem(_train(task="lora", lora_dropout=0.05))
    # one byte per input element of each of the seven adapters: 3h + h + 2h + f per token
    assert drop.detail["hf_layer_dropout_masks"] == 2048 * (6 * 4096 + 14336)
    assert drop.total > base.total
    no_autocast = _mem(_train(task="lora"), assumptions=Assumptions(hf_autocast=False))
    # PEFT's fp32 copies (4 B) without autocast, autocast's bf16 casts (2 B) with it
    assert no_autocast.detail["hf_layer_adapter_inputs"] == 2 * base.detail["hf_layer_adapter_inputs"]


def test_loss_terms_follow_the_loop():
    t = _train(task="lora")
    held = _mem(t, assumptions=Assumptions(hf_logits_held=True))
    dropped = _mem(t, assumptions=Assumptions(hf_logits_held=False))
    assert held.total - dropped.total == pytest.approx(2 * 2048 * 128256, rel=0.06)   # + fragmentation share
    chunked = _mem(t, assumptions=Assumptions(hf_loss="chunked"))
    assert chunked.total < dropped.total - 2 * GIB


def test_gradients_are_allocated_after_the_loss_unless_accumulated():
    one = _mem(_train(task="sft", master_weights="none"), "full")
    accumulated = _mem(_train(task="sft", master_weights="none", global_batch_size=4), "full")
    assert accumulated.gradients == 2 * LLAMA8B.params              # kept from the first micro-batch
    assert accumulated.total >= one.total


def test_fp32_model_under_autocast_keeps_16bit_weight_casts():
    m = _mem(_train(task="sft"), "none")
    assert m.detail["hf_autocast_weight_copies"] == 2 * (LLAMA8B.params - 128256 * 4096 - 65 * 4096)


def test_qlora_prices_one_dequantised_weight():
    m = _mem(_train(task="qlora"), "full")
    assert m.detail["hf_qlora_dequant"] == 2 * 4096 * 14336


def test_peft_export_writes_dropout_targets_and_optim():
    t = advisor.recommend(H200, LLAMA8B, _train(task="lora", lora_dropout=0.05, optimizer="paged-adamw-8bit",
                                                 lora_targets=("q_proj", "v_proj"))).training
    cfg = json.loads(peft_config(LLAMA8B, t))
    assert cfg["lora_config"]["lora_dropout"] == 0.05
    assert cfg["lora_config"]["target_modules"] == ["q_proj", "v_proj"]
    assert cfg["training_arguments"]["optim"] == "paged_adamw_8bit"


def test_trace_echoes_a_stated_optimizer_and_master():
    r = advisor.recommend(H200, LLAMA8B, _train(task="sft", optimizer="adamw-8bit", master_weights="none"))
    assert r.trace.input.optimizer == "adamw-8bit"
    assert r.trace.input.master_weights == "none"
    plain = advisor.recommend(H200, LLAMA8B, _train(task="sft"))
    assert plain.trace.input.optimizer is None


def test_peft_adapter_paths_are_priced_at_both_widths():
    """PEFT casts each adapter's input to fp32 and adds its output back (benchmarks/peft_traffic.py counts
    the bytes): an adapter on down_proj (input 14336 wide, output 4096) pays both widths, by hand."""
    from advisor.costmodel.compute import PEFT_INPUT_BYTES, PEFT_OUTPUT_BYTES, _peft_output_seconds
    from advisor.costmodel.context import resolve
    lay = Layout(**PLAIN, micro_batch_size=1, recompute="none")
    training = _train(task="lora", lora_targets=("down_proj",))
    c = resolve(H200, LLAMA8B, lay, training)
    tokens = 2048.0
    (out_f, out_b), (in_f, in_b) = PEFT_OUTPUT_BYTES[False], PEFT_INPUT_BYTES[False]
    per_token = (out_f + out_b) * 4096 + (in_f + in_b) * 14336
    bw = c.prof.memory_bandwidth * c.prof.memory_bound.at(4.0 * tokens * 14336)
    assert _peft_output_seconds(c, Assumptions(hf_autocast=False), 1, tokens) == pytest.approx(per_token * tokens / bw)
