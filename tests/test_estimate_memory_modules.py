"""Memory terms for options published runs use beyond Korthikanti's list: Megatron-Core's selective
`recompute_modules` and the optimizer-state bytes of NeMo 1.x's Apex distributed Adam. Each term is
checked against the per-tensor accounting written out by hand (bytes per token)."""

from __future__ import annotations

import pytest

from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import (
    Assumptions,
    memory_only,
    LayerActivations,
    MoEActivations,
    model_state_bytes_per_param,
)
from advisor.inputs.specs import MLA

# DeepSeek-V3 MLA widths (arXiv:2412.19437 §4.2): 128 heads, q/k head 128 + 64 rope, v head 128,
# latents q 1536 + kv 512 + rope 64
S, B, H, A_, T = 4096, 1, 7168, 128, 2
WQ = WK = 128 * (128 + 64)
WV = WO = 128 * 128
LATENT = 1536 + 512 + 64


def _mla_attention(**kw):
    return LayerActivations(S, B, H, A_, t=T, sp=True, flash=True, wq=WQ, wk=WK, wv=WV, wo=WO, kv_div=T,
                                 latent=LATENT, dropout_masks=False, mlp=False, **kw).bytes()


def test_mla_attention_no_recompute_by_hand():
    # LN input 2h + LN output 2h + latents 2*latent, all SP-sharded; Q, K, V, out-proj input, LSE
    per_token = (2 * H + 2 * H + 2 * LATENT) / T + (2 * WQ + 2 * (WK + WV) + 2 * WO + 4 * A_) / T
    assert _mla_attention() == pytest.approx(S * B * per_token, rel=1e-12)


def test_selective_mla_up_proj_and_layernorm_by_hand():
    """NeMo 2 deepseek_v3 recipe: recompute_modules = ["mla_up_proj", "layernorm"]. The core attention
    is not in the list, so its softmax statistics stay; the up-projected Q, K, V and the input norm's
    output are discarded."""
    got = _mla_attention(recompute="selective", modules=("mla_up_proj", "layernorm"))
    per_token = (2 * H + 2 * LATENT) / T + (2 * WO + 4 * A_) / T
    assert got == pytest.approx(S * B * per_token, rel=1e-12)
    dropped = _mla_attention() - got
    assert dropped == pytest.approx(S * B * (2 * H + 2 * WQ + 2 * (WK + WV)) / T, rel=1e-12)


def test_default_modules_are_korthikanti_selective():
    kw = dict(t=8, sp=True, flash=False, f=4 * 6144, dropout_masks=True)
    sel = LayerActivations(2048, 1, 6144, 64, recompute="selective", **kw).bytes()
    assert sel == pytest.approx(2048 * 6144 * 34 / 8, rel=1e-12)          # Table 2, TP + SP + selective
    assert LayerActivations(2048, 1, 6144, 64, recompute="selective", modules=("core_attn",), **kw).bytes() == sel
    # modules only act under "selective"
    none = LayerActivations(2048, 1, 6144, 64, recompute="none", **kw).bytes()
    assert LayerActivations(2048, 1, 6144, 64, recompute="none", modules=("core_attn", "mlp"), **kw).bytes() == none


def test_layernorm_and_mla_up_proj_do_nothing_without_mla():
    """Transformer Engine fuses a standard attention block's input norm into linear_qkv and a dense
    MLP's norm into linear_fc1 (gpt_layer_specs.py): no separate norm output to discard."""
    kw = dict(t=4, sp=True, flash=True, f=28672, gated=True, dropout_masks=False, wq=8192, wk=1024, wv=1024, wo=8192,
              kv_div=4)
    base = LayerActivations(4096, 1, 8192, 64, recompute="selective", modules=(), **kw).bytes()
    same = LayerActivations(4096, 1, 8192, 64, recompute="selective", modules=("layernorm", "mla_up_proj"), **kw).bytes()
    assert same == base


def test_dense_mlp_recompute_keeps_only_its_input():
    s, b, h, a, t, f = 4096, 1, 8192, 64, 4, 28672
    kw = dict(t=t, sp=True, flash=True, f=f, gated=True, dropout_masks=False)
    none = LayerActivations(s, b, h, a, recompute="none", **kw).bytes()
    mlp = LayerActivations(s, b, h, a, recompute="selective", modules=("mlp",), **kw).bytes()
    # the MLP keeps its input 2h (/t under SP); FC1 input 2h/t, SwiGLU FC1 out 4f/t, FC2 in 2f/t go
    assert none - mlp == pytest.approx(s * b * (2 * h / t + 6 * f / t), rel=1e-12)


# Qwen3-235B-A22B MoE block (HF config): h 4096, 128 experts of 1536, top-8, no shared expert
MOE = dict(t=2, etp=1, sp=True, k=8, experts=128, f_moe=1536, shared=0, gated=True, dropout_masks=False)


def test_moe_block_by_hand():
    h, t, k, f, e = 4096, 2, 8, 1536, 128
    got = MoEActivations(S, B, h, **MOE).bytes()
    # LN input 2h + LN output (router input) 2h + fp32 logits/probs 8E, SP-sharded; per routed copy
    # (s*k/t copies per rank with ETP 1): permuted input 2h + expert output 2h + FC1 out 4f + FC2 in 2f
    per_token = (2 * h + 2 * h + 8 * e) / t + k * (4 * h + 6 * f) / t
    assert got == pytest.approx(S * B * per_token, rel=1e-12)


def test_moe_layernorm_and_moe_act_by_hand():
    """MoE model zoo H100 runs of Qwen3-235B: --recompute-modules moe_act layernorm."""
    h, t, k, f, e = 4096, 2, 8, 1536, 128
    got = MoEActivations(S, B, h, modules=("layernorm", "moe_act"), **MOE).bytes()
    per_token = (2 * h + 8 * e) / t + k * (4 * h + 4 * f) / t
    assert got == pytest.approx(S * B * per_token, rel=1e-12)


def test_moe_layer_recompute_and_shared_experts_by_hand():
    h, t = 7168, 2
    kw = dict(MOE, experts=256, f_moe=2048, shared=1)
    assert MoEActivations(S, B, h, modules=("moe",), **kw).bytes() == pytest.approx(S * B * 4 * h / t, rel=1e-12)
    full = MoEActivations(S, B, h, **kw).bytes()
    no_shared = MoEActivations(S, B, h, modules=("shared_experts",), **kw).bytes()
    assert full - no_shared == pytest.approx(S * B * 6 * 2048 / t, rel=1e-12)   # SwiGLU 4f + FC2 in 2f


def test_recompute_modules_through_estimate_deepseek_v3_recipe():
    """NeMo 2 deepseek_v3 recipe layout (TP2 PP16 EP64, ETP1, SP, 1024 GPUs): 61 layers run as
    3 | 4 x 14 | 2 (context.megatron_split, the recipe's own first/last split), so the most-loaded
    stage is stage 1: four MoE layers (3-6) x 15 in-flight micro-batches; its activations follow the
    two formulas above."""
    ds = Model(layers=61, hidden=7168, heads=128, ffn_hidden=18432, moe_ffn_hidden=2048, vocab=129280,
               experts=256, experts_per_token=8, shared_experts=1, dense_layers=3,
               mla=MLA(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                       v_head_dim=128))
    lay = Layout(tp=2, pp=16, ep=64, etp=1, sp=True, zero_stage=1, recompute="selective")
    mods = ("mla_up_proj", "layernorm")
    mem = memory_only(Cluster(gpu="H100", gpus=1024), ds, lay, Training(seq_len=4096, global_batch_size=4096),
                      Assumptions(recompute_modules=mods))
    assert mem.stage == 1 and mem.detail["layers"] == 4 and mem.detail["chunks_in_flight"] == 15
    attn = _mla_attention(recompute="selective", modules=mods)
    moe = MoEActivations(S, B, H, t=2, etp=1, sp=True, k=8, experts=256, f_moe=2048, shared=1, gated=True,
                              dropout_masks=False, modules=mods).bytes()
    assert mem.detail["act_layers"] == pytest.approx(4 * 15 * (attn + moe), rel=1e-12)
    default = memory_only(Cluster(gpu="H100", gpus=1024), ds, lay, Training(seq_len=4096, global_batch_size=4096))
    assert mem.activations < default.activations


def test_megatron_optimizer_bytes():
    """NeMo 1.x Apex distributed Adam with optim.dtype bf16 on a bf16 model: bf16 m, v only (4 B);
    with the fp32 default it keeps param remainders (10 B); Megatron-Core's distributed optimizer 12."""
    w, g, o = model_state_bytes_per_param("megatron", "bf16", 1, main_grad_bytes=2.0, optimizer_bytes=4.0)
    assert (w, g, o) == ((2, 0), (2.0, 0), (0, 4.0))
    w, g, o = model_state_bytes_per_param("megatron", "bf16", 0, optimizer_bytes=10.0)
    assert (w, g, o) == ((2, 0), (4.0, 0), (10.0, 0))
    assert model_state_bytes_per_param("megatron", "fp16", 1, optimizer_bytes=4.0)[2] == (0, 16)

    model = Model.preset("llama-2-7b")
    tr = Training(seq_len=4096, global_batch_size=8)
    cl = Cluster(gpu="H100", gpus=8)
    twelve = memory_only(cl, model, Layout(zero_stage=1, dp=8), tr)
    four = memory_only(cl, model, Layout(zero_stage=1, dp=8), tr, Assumptions(megatron_optimizer_bytes=4.0))
    assert twelve.optimizer == pytest.approx(12 * model.params / 8, rel=1e-9)
    assert four.optimizer == pytest.approx(4 * model.params / 8, rel=1e-9)
    assert four.weights == twelve.weights and four.gradients == twelve.gradients


def test_recompute_modules_are_validated():
    with pytest.raises(Exception):
        Assumptions(recompute_modules=("attention",))
