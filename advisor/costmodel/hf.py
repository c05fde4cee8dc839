"""Memory of a training step as the Hugging Face stack runs it: transformers' model code, PEFT's LoRA
adapters, torch autocast and gradient checkpointing, and the peak of the step (Training.framework
"hf-trl" or "hf-accelerate"; `applies`). Only the memory estimate reads this module; time and the
other stacks keep costmodel.memory's Megatron-style terms.

What each decoder layer keeps for its backward, per token (h hidden, wq/wk/wv/wo the attention widths,
f the MLP width; 16-bit tensors 2 bytes per element, fp32 4). Sources, each at a commit:
- transformers' Llama layer (github:huggingface/transformers@5dd4a63548857797727ae73eeb6a6e886ea02a3e
  src/transformers/models/llama/modeling_llama.py; Mistral, Qwen2, Gemma and SmolLM3 are copies):
  * LlamaRMSNorm upcasts its input to fp32 (`hidden_states.to(torch.float32)`), and `pow(2)` and the
    multiply by `rsqrt` keep that fp32 copy (4h) and the fp32 reciprocal (4 bytes); `self.weight *
    hidden.to(input_dtype)` keeps the normalised tensor (2h, or 4h in an fp32 model) when the weight
    trains. A LayerNorm keeps its input (fp32 under autocast, which runs layer_norm in fp32) and its
    fp32 mean and rstd.
  * q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj are separate nn.Linear modules: a
    linear whose weight trains keeps its input (one tensor shared by q/k/v and by gate/up); a frozen one
    keeps nothing of it (autograd saves an operand only for the gradient that needs it: mm's input for
    the weight gradient).
  * RoPE multiplies q and k by cos / sin (which keep nothing of q, k); the attention keeps the rotated q
    and k and v: SDPA's fused kernels and FlashAttention-2 keep q, k, v, their output and the fp32
    log-sum-exp per head (github:huggingface/transformers@e2feb59b62124ad52a51616968f1465613bf8644
    src/transformers/integrations/sdpa_attention.py: GQA without repeat_kv when there is no mask);
    eager attention keeps K and V repeated to every head, the fp32 softmax and its 16-bit copy (6 bytes
    per score) and one s x s mask per forward (`eager_attention_forward`). The attention output is made
    contiguous (a new tensor) for o_proj.
  * SwiGLU: act_fn(gate) keeps gate's output, the product keeps act_fn's output and up's output (3 x 2f),
    down_proj the product when it trains; GELU keeps fc1's output and fc2 the activation.
- PEFT LoRA (github:huggingface/peft@5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40 src/peft/tuners/lora/layer.py
  Linear.forward, tuners_utils.py `_cast_input_dtype`, `cast_adapter_dtype`): adapters are fp32 by default
  (autocast_adapter_dtype=True), and `lora_B(lora_A(dropout(x)))` runs on `x.to(lora_A.weight.dtype)`:
  each adapter makes its own fp32 copy of its input and lora_A keeps it for its weight gradient (under
  autocast, the 16-bit cast autocast makes of it instead); lora_B keeps the rank-r output of lora_A; with
  lora_dropout > 0 an nn.Dropout keeps its 1-byte mask and its output is what lora_A keeps.
- torch autocast (bf16): linear inputs and weights are cast to bf16 per call, a weight's cast cached for
  the autocast region and kept by autograd until that layer's backward (2 bytes per weight of an fp32
  model); pow, softmax, log_softmax and layer_norm run in fp32. An fp32 model's residual stream is fp32.
- The loss (github:huggingface/transformers@d0fed636753eeb35d790126c4496d06847983d60 src/transformers/loss/
  loss_utils.py ForCausalLMLoss): `logits.float()` then cross_entropy = log_softmax + nll_loss. The
  log-softmax output (4 bytes per logit) is kept; its backward holds the incoming gradient and its own
  result (4 + 4): 12 bytes per logit at the loss backward, plus the 16-bit logits (2) while the training
  loop holds the model output (Assumptions.hf_logits_held). Chunked losses (TRL's loss_type="chunked_nll",
  github:huggingface/trl@f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/sft_trainer.py
  `_chunked_cross_entropy_loss`: 256 tokens per chunk, each chunk checkpointed; Liger's fused linear
  cross-entropy likewise) keep a copy of the final hidden states and one chunk's logits at a time.
- Gradient checkpointing (transformers `gradient_checkpointing_enable`, torch.utils.checkpoint
  non-reentrant): each layer keeps its input only; the backward re-runs one layer's forward at a time,
  so that layer's activations and its backward's gradients are the working set.
- bitsandbytes NF4 (QLoRA; github:bitsandbytes-foundation/bitsandbytes@95f9af309d4d5793847169c39288dcd3fcbdf564
  bitsandbytes/autograd/_functions.py MatMul4Bit, backends/cuda/ops.py gemm_4bit): MatMul4Bit keeps only
  the packed weight; past 1536 tokens the forward dequantises the weight to 16-bit and runs F.linear, and
  the backward dequantises it again: one linear's 16-bit weight is a transient.

The step's peak (PyTorch allocates gradients in the backward and the optimizer's states at its first
step; the Trainer frees gradients with zero_grad(set_to_none=True)) is the largest of:
1. the end of the forward: the stored activations, autocast's weight casts, the loss's forward
   (16-bit logits, their fp32 copy, the log-softmax: 10 bytes per logit);
2. the loss backward: the stored activations and 12 bytes per logit (+2 held);
3. the end of the backward, which is also the first optimizer step: every gradient (and a tied
   embedding's second gradient, which autograd's AccumulateGrad adds into the first), or an optimizer
   step's own transient;
4. the backward of the first layer: the gradients of every other layer, that layer's activations
   (re-computed under checkpointing) and its backward's gradient tensors, a QLoRA dequantised weight.
The optimizer's states and the weights are resident in all four. With one micro-batch per step and
gradients that the step frees (plain PyTorch or FSDP; not DeepSpeed's engine buffers, not DDP's buckets
on several GPUs) no gradient exists before the loss backward, so 1 and 2 carry none.
"""

from __future__ import annotations

from typing import NamedTuple

from ..inputs.stacks import HF_STACKS
from .adapters import layer_linears
from .context import Ctx

__all__ = ["applies", "HFLayer", "layer_bytes", "HFPeak", "hf_peak", "fp32_params"]

LOGITS_FORWARD_BYTES = 10.0
"""16-bit logits + their fp32 upcast + the fp32 log-softmax, per logit, at the end of the loss forward."""
LOGITS_BACKWARD_BYTES = 12.0
"""The fp32 log-softmax kept, the gradient it receives and the one it returns, per logit."""
CHUNK_TOKENS = 256
"""TRL's _CHUNKED_LM_HEAD_CHUNK_SIZE: tokens per checkpointed chunk of the chunked loss."""
CHUNK_BYTES_PER_LOGIT = 14.0
"""One chunk's logits in its re-run forward and backward: 16-bit logits, fp32 upcast, log-softmax, gradient."""


def applies(c: Ctx) -> bool:
    """The stated stack runs transformers' model code and the layout is one it runs (data parallelism
    only, as rules/stated-framework.toml allows): a dense decoder without MLA or a hybrid stack."""
    return (c.stated_stack in HF_STACKS and c.tp == 1 and c.pp == 1 and c.cp == 1 and c.experts <= 1 and c.hyb is None
            and not c.latent)


def fp32_params(c: Ctx) -> bool:
    """The trained weights are stored in fp32 and cast by autocast: an fp32 master that is the model
    itself, i.e. plain PyTorch or DDP (Layout framework "torchtitan" at ZeRO 0, the Trainer without a
    DeepSpeed or FSDP config). DeepSpeed and FSDP compute from 16-bit parameters."""
    return c.master == "fp32" and c.framework == "torchtitan" and c.zero == 0


class HFLayer(NamedTuple):
    """Bytes one decoder layer keeps for its backward, per token, by where they come from."""

    norms: float
    """The RMSNorms' fp32 upcast and reciprocal, the normalised tensor a trained norm weight keeps
    (LayerNorm: its input, mean and rstd)."""
    linear_inputs: float
    """Inputs of linears whose weights train (each tensor once; an fp32 input once per linear, cast by
    autocast)."""
    adapter_inputs: float
    """What each LoRA adapter's lora_A keeps: its copy of the input (fp32, or autocast's 16-bit cast)."""
    adapter_rank: float
    """The rank-r output of each lora_A, kept by lora_B."""
    dropout_masks: float
    """1 byte per input element of each adapter with lora_dropout > 0."""
    attention: float
    """Rotated q and k, v, the output and the log-sum-exp (fused); eager: repeated K, V and the scores."""
    mlp: float
    """Gate and up outputs, the activation's output (SwiGLU); fc1's output (GELU)."""

    @property
    def total(self) -> float:
        return (self.norms + self.linear_inputs + self.adapter_inputs + self.adapter_rank + self.dropout_masks
                + self.attention + self.mlp)


class _Flow(NamedTuple):
    """Dtypes of the step: residual stream (rs) and norm output (nb) bytes, autocast, adapter bytes."""

    rs: float
    nb: float
    autocast: bool
    adapter: float
    dropout: bool
    full: bool


def _flow(c: Ctx, A) -> _Flow:
    full = not c.frozen
    amp32 = full and fp32_params(c)
    rs = 4.0 if amp32 else 2.0
    autocast = amp32 or A.hf_autocast
    layernorm = c.pc.final_norm > c.h
    nb = 4.0 if (layernorm and autocast) else rs
    adapter = 4.0 if (c.master == "fp32" and c.framework == "torchtitan" and c.zero == 0) else 2.0
    return _Flow(rs, nb, autocast, adapter, c.lora_dropout > 0.0, full)


def _inputs(fl: _Flow, d_in: int, x_bytes: float, adapted: bool) -> tuple:
    """What one linear of input width d_in keeps of its input, a tensor of x_bytes per element:
    (linear_inputs, adapter_inputs, dropout_masks, the base keeps the tensor itself, the adapter keeps
    the tensor itself); a tensor kept itself is shared by its readers and counted once by the caller."""
    lin = ada = mask = 0.0
    base_kept = adapter_kept = False
    if fl.full:
        if x_bytes == 2.0 or not fl.autocast:
            base_kept = True                 # the input itself
        else:
            lin += 2.0 * d_in                # autocast's per-call 16-bit cast of an fp32 input
    if adapted:
        if fl.dropout:                       # nn.Dropout on the adapter's copy: its mask and its output
            mask += d_in
            ada += 2.0 * d_in if (fl.autocast and fl.adapter == 4.0) else fl.adapter * d_in
        elif fl.autocast and fl.adapter == 4.0:
            ada += 2.0 * d_in                # autocast's 16-bit cast of the fp32 copy, for lora_A
        elif x_bytes != fl.adapter:
            ada += fl.adapter * d_in         # _cast_input_dtype's copy
        else:
            adapter_kept = True
    return lin, ada, mask, base_kept, adapter_kept


def layer_bytes(c: Ctx, A) -> HFLayer:
    """HFLayer of one dense decoder layer under the stack's dtypes (module docstring); the adapters
    are PEFT's, one per module in c.lora_targets."""
    fl = _flow(c, A)
    h, f = c.h, c.f
    adapted = set(c.lora_targets)
    layernorm = c.pc.final_norm > h
    if layernorm:
        norm_one = (4.0 * h if (fl.autocast or fl.rs == 4.0) else 2.0 * h) + 8.0
    else:
        norm_one = 4.0 * h + 4.0 + (fl.rs * h if fl.full else 0.0)
    norms = 2.0 * norm_one
    lin_in = ada_in = masks = 0.0

    def group(d_in: int, x_bytes: float, names: tuple) -> None:
        """The linears that read one tensor (q/k/v; gate/up)."""
        nonlocal lin_in, ada_in, masks
        by_base = by_adapter = False
        for name in names:
            li, ad, mk, kb, ka = _inputs(fl, d_in, x_bytes, name in adapted)
            lin_in, ada_in, masks = lin_in + li, ada_in + ad, masks + mk
            by_base, by_adapter = by_base or kb, by_adapter or ka
        if by_base:
            lin_in += x_bytes * d_in
        elif by_adapter:
            ada_in += x_bytes * d_in

    group(h, fl.nb, ("q_proj", "k_proj", "v_proj"))
    group(c.wo, 2.0, ("o_proj",))
    group(h, fl.nb, ("gate_proj", "up_proj") if c.gated else ("up_proj",))
    group(f, 2.0, ("down_proj",))
    n_adapters = len(layer_linears(c.lora_targets, h, c.wq, c.wk, c.wv, c.wo, f, c.gated))
    rank = n_adapters * c.lora_rank * (2.0 if fl.autocast else fl.adapter)
    heads, kv = c.a, c.kv
    if c.flash:
        attention = 2.0 * (c.wq + c.wk + c.wv) + 2.0 * c.wq + 4.0 * heads
    else:
        rep = 2.0 * c.wq if kv < heads else 2.0 * c.wk
        attention = 2.0 * c.wq + 2.0 * rep + 6.0 * heads * c.seq
    mlp = (3.0 if c.gated else 1.0) * 2.0 * f
    return HFLayer(norms, lin_in, ada_in, rank, masks, attention, mlp)


class HFPeak(NamedTuple):
    """The step's peak on one rank (bytes): the activation side and the gradients alive then, of which
    the loss's and the working layer's parts, and the named terms (MemoryEstimate.detail's hf_*)."""

    activations: float
    gradients: float
    loss: float
    working: float
    phase: int
    detail: dict


class _Loss(NamedTuple):
    """The loss's bytes for one micro-batch: kept through the backward, at the forward's end, at the
    loss backward, and the 16-bit logits a loop holding the output keeps."""

    kept: float
    forward: float
    backward: float
    held: float


def _loss_terms(c: Ctx, A, tokens: float) -> _Loss:
    held = 2.0 * tokens * c.vocab if _held(c, A) else 0.0
    if A.hf_loss == "chunked":
        kept = 2.0 * tokens * c.h
        chunk = CHUNK_BYTES_PER_LOGIT * min(tokens, CHUNK_TOKENS) * c.vocab
        return _Loss(kept, kept + chunk, kept + chunk, 0.0)
    return _Loss(4.0 * tokens * c.vocab, LOGITS_FORWARD_BYTES * tokens * c.vocab,
                 LOGITS_BACKWARD_BYTES * tokens * c.vocab + held, held)


def _held(c: Ctx, A) -> bool:
    """The loop holds the model output (and its 16-bit logits) through the backward."""
    if A.hf_logits_held == "auto":
        return c.stated_stack == "hf-accelerate"
    return bool(A.hf_logits_held)


class _Stack(NamedTuple):
    """The model's bytes for one micro-batch beside the loss."""

    stored: float
    """Every layer's kept tensors (or its checkpointed input), the final norm's and the output head's
    input, the embedding's token ids, eager attention's mask."""
    checkpoints: float
    copies: float
    """autocast's bf16 casts of an fp32 model's linear weights and output head."""
    working: float
    """The first layer in its backward: its activations (re-computed under checkpointing), its backward's
    gradient tensors, its input, its weights' casts, a QLoRA dequantised weight."""
    dequant: float
    step: float
    """At the end of the backward: the optimizer step's transient or a tied embedding's second gradient,
    the larger."""
    opt_step: float
    tied: float


def _stack_terms(c: Ctx, fl: _Flow, layer: HFLayer, tokens: float) -> _Stack:
    h = c.h
    per_layer = layer.total * tokens
    final = (4.0 * h + 4.0 + (fl.rs * h + 2.0 * h if fl.full else 0.0)) * tokens   # final norm (+ lm_head input)
    embed = 8.0 * tokens if fl.full else 0.0                                      # int64 ids, embedding backward
    mask = 0.0 if c.flash else fl.rs * c.b * c.seq * c.seq                        # eager: one s x s mask
    ckpt = c.recompute == "full"
    checkpoints = c.L * fl.rs * h * tokens if ckpt else 0.0
    stored = (checkpoints if ckpt else c.L * per_layer) + final + embed + mask
    one_layer = c.pc.attention + c.pc.dense_mlp
    amp32 = fl.full and fl.rs == 4.0
    copies = 2.0 * (c.L * one_layer + c.vocab * h) if amp32 else 0.0
    dequant = 0.0
    if c.qlora:
        dequant = 2.0 * max(lin.d_in * lin.d_out for lin in
                            layer_linears(("all-linear",), h, c.wq, c.wk, c.wv, c.wo, c.f, c.gated))
    working = (per_layer + (3.0 * 2.0 * c.f + 2.0 * fl.rs * h) * tokens + (fl.rs * h * tokens if ckpt else 0.0)
               + (2.0 * one_layer if amp32 else 0.0) + dequant)
    # a tied embedding's second gradient (the lookup's, after the output head's): computed whole, then
    # added into .grad (torch autograd AccumulateGrad), in the compute parameters' dtype
    tied = fl.rs * c.vocab * h if (fl.full and c.tied) else 0.0
    opt_step = _optimizer_step_bytes(c)
    return _Stack(stored, checkpoints, copies, working, dequant, max(opt_step, tied), opt_step, tied)


def _grads_alive(c: Ctx, grads: float, trained_params: float) -> tuple[float, float]:
    """(gradient bytes alive before the loss backward, in the first layer's backward): none before the
    backward when the step frees them and runs one micro-batch; all but that layer's in its backward."""
    persistent = c.m > 1 or c.deepspeed or (c.framework == "torchtitan" and c.zero == 0 and c.dp > 1)
    if persistent:
        return grads, grads
    return 0.0, grads - grads * _layer_share(c, trained_params)


def hf_peak(c: Ctx, A, grads: float, trained_params: float) -> HFPeak:
    """HFPeak of the stage's rank: `grads` the gradient bytes of the layout, `trained_params` its trained
    parameters (for the share of one layer's gradients)."""
    fl = _flow(c, A)
    layer = layer_bytes(c, A)
    tokens = c.s_loc * c.b
    st = _stack_terms(c, fl, layer, tokens)
    loss = _loss_terms(c, A, tokens)
    early, later = _grads_alive(c, grads, trained_params)
    saved_copies = 0.0 if c.recompute == "full" else st.copies    # checkpointing saves no cast for the backward
    phases = (
        (st.stored + st.copies + loss.forward, early, loss.forward),
        (st.stored + saved_copies + loss.backward, early, loss.backward),
        (loss.held + st.step, grads, loss.held),
        (st.working + loss.held, later, loss.held),
    )
    best = max(range(4), key=lambda i: phases[i][0] + phases[i][1])
    act, g, at_loss = phases[best]
    detail = _detail(layer, tokens, st, loss) | {"hf_peak_phase": best + 1, "hf_grads_after_peak": int(grads - g)}
    return HFPeak(act, g, at_loss, st.working if best == 3 else 0.0, best + 1, detail)


def _detail(layer: HFLayer, tokens: float, st: _Stack, loss: _Loss) -> dict:
    """MemoryEstimate.detail's hf_* terms, whole bytes: one layer's kept tensors by kind, the stack's terms."""
    per_layer = {f"hf_layer_{name}": int(value * tokens) for name, value in zip(HFLayer._fields, layer)}
    return per_layer | {
        "hf_stored": int(st.stored), "hf_checkpoints": int(st.checkpoints), "hf_recompute_working": int(st.working),
        "hf_loss_kept": int(loss.kept), "hf_loss_forward": int(loss.forward), "hf_loss_backward": int(loss.backward),
        "hf_logits_held": int(loss.held), "hf_autocast_weight_copies": int(st.copies),
        "hf_qlora_dequant": int(st.dequant), "hf_optimizer_step": int(st.opt_step), "hf_tied_embedding_grad": int(st.tied),
    }


def _optimizer_step_bytes(c: Ctx) -> float:
    """Transient of the optimizer step: transformers' Adafactor steps one tensor at a time through an fp32
    copy of it and an update of its size (optimization.py Adafactor.step), 8 bytes per element of the
    largest trained tensor; the fused / foreach torch optimizers and bitsandbytes' update in place."""
    if c.optimizer != "adafactor":
        return 0.0
    if c.frozen:
        largest = c.lora_rank * max(c.h, c.f)
    else:
        largest = max(c.vocab * c.h, c.h * c.f)
    return 8.0 * largest


def _layer_share(c: Ctx, trained_params: float) -> float:
    """Share of the rank's trained parameters in one decoder layer's (and an untied embedding's, whose
    gradient the backward writes last)."""
    if c.frozen or trained_params <= 0:
        return 1.0 / c.L if c.frozen else 0.0
    one = c.pc.attention + c.pc.dense_mlp + c.pc.norms
    if not c.tied:
        one += c.vocab * c.h
    return min(1.0, one / trained_params)
