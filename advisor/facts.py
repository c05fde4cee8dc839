"""Fact builder: inputs -> one plain fact document the rules match on.

Units stop here. Every value is a plain int, float, bool or str, grouped as `cluster.*`,
`model.*`, `training.*` and `sizing.*`. Arithmetic the rules need (model-state bytes against one
GPU / one node / the cluster, whether one layer fits, ...) is done here in Python, never in rule
conditions (DESIGN §3). `CATALOGUE` names every fact with its type and meaning; the rule compiler
rejects any field that is not in it, so a typo in a rule file fails at load time.
"""

from __future__ import annotations

import math
import re

from dataclasses import dataclass
from typing import Any

from .costmodel.assumptions import Assumptions
from .costmodel.adapters import finetune_state_bytes
from .costmodel.states import model_state_bytes_per_param, state_args
from .costmodel.fits import ZERO_ONLY_MAX_GPUS, dp_only_fits, zero_only_fits
from .inputs.architecture import count_parameters, gdn_shape_ok, mamba_shape_ok
from .inputs.layout import Layout
from .inputs.pipeline import megatron_split, pipeline_split, stage_layers, virtual_stage_layers
from .inputs.precision import megatron_adam_dtypes, recipe
from .inputs.specs import Cluster, Model, Training
from .inputs.uncertainty import memory_headroom

__all__ = ["FactSpec", "CATALOGUE", "LAYOUT_GROUPS", "Versus", "COMPARED_WITH", "LayoutCase", "build_facts", "build_layout_facts",
           "zero_only_fits",
           "state_bytes_per_param", "torchtitan_layers_per_stage", "ZERO_ONLY_MAX_GPUS", "UNSTATED"]

GIB = 2**30
_DEFAULT_ASSUMPTIONS = Assumptions()
# training.framework / training.framework_version when the user states none (facts are never None)
UNSTATED = "unstated"


def state_bytes_per_param(precision: str, optimizer: str = "adam", master: str = "fp32", hidden: int = 1) -> float:
    """Model-state bytes per parameter with no sharding (Megatron-LM, mixed-precision Adam): 18 for
    bf16/fp8, 20 for fp16; another Training.optimizer or master_weights "none" changes the optimizer
    and gradient parts (costmodel.states.state_args: 8 for bf16 AdamW without a master copy). One
    source for the number: the cost model's per-stage table (advisor.costmodel.states.
    model_state_bytes_per_param, which cites Megatron-LM's theoretical_memory_usage.py and DeepSpeed's
    estimators)."""
    sa = state_args(optimizer, master, hidden, _DEFAULT_ASSUMPTIONS)
    return sum(sum(part) for part in model_state_bytes_per_param(
        "megatron", precision, 0, main_grad_bytes=sa.main_grad_bytes, optimizer_bytes=sa.optimizer_bytes))


# Groups that exist only when a concrete layout is being judged (audit rule files, scope "layout").
LAYOUT_GROUPS = frozenset({"layout", "check", "assume", "versus"})


COMPARED_WITH = "compared with the advisor's pick"


@dataclass(frozen=True)
class Versus:
    """The audited layout beside the advisor's own pick for the same situation (the `versus.*` facts):
    both estimated by the same cost model. api.audit(compare=True) builds it; the planner, which
    owns the near-tie band, is not importable here, so `band` comes with it."""

    pick: str            # the recommended layout's id
    pick_step: float     # its estimated step time, seconds
    step: float          # the audited layout's, seconds
    band: float          # the planner's near-tie band (planner.ranking.NEAR_TIE), a fraction

    def note(self) -> str:
        """The comparison in one line, for the audit's decision log and text."""
        return (f"{COMPARED_WITH} {self.pick}: est. step {self.step:.2f} s vs {self.pick_step:.2f} s "
                f"({self.step / self.pick_step - 1:+.0%}); estimates within {self.band:.0%} are ties")

    def facts(self) -> dict[str, Any]:
        slower = self.step / self.pick_step - 1 if self.pick_step > 0 else 0.0
        return {"compared": True, "pick": self.pick, "pick_step_s": _round(self.pick_step),
                "step_s": _round(self.step), "slower_percent": _round(100 * slower),
                "band_percent": _round(100 * self.band), "beyond_band": slower > self.band}


# versus.* when no comparison was asked for (every audit by default, every candidate the planner screens)
_NOT_COMPARED = {"compared": False, "pick": "", "pick_step_s": 0.0, "step_s": 0.0, "slower_percent": 0.0,
                 "band_percent": 0.0, "beyond_band": False}


@dataclass(frozen=True)
class FactSpec:
    name: str            # "<group>.<field>"
    type: type           # int, float, bool or str
    doc: str

    @property
    def scope(self) -> str:
        return "layout" if self.name.split(".")[0] in LAYOUT_GROUPS else "situation"


def _specs(*rows: tuple[str, type, str]) -> dict[str, FactSpec]:
    return {name: FactSpec(name, typ, doc) for name, typ, doc in rows}


CATALOGUE: dict[str, FactSpec] = _specs(
    ("cluster.gpus", int, "total GPUs (world size)"),
    ("cluster.gpus_per_node", int, "GPUs per server"),
    ("cluster.nodes", int, "servers, ceil(gpus / gpus_per_node)"),
    ("cluster.nvlink_domain", int, "GPUs sharing one NVLink domain, capped at the world size"),
    ("cluster.multi_node", bool, "the job spans more than one server"),
    ("cluster.gpu_name", str, "GPU preset name or 'custom'"),
    ("cluster.gpu_memory_gib", float, "memory of one GPU, GiB"),
    ("cluster.node_memory_gib", float, "GPU memory of one server, GiB"),
    ("cluster.cluster_memory_gib", float, "GPU memory of the whole cluster, GiB"),
    ("cluster.host_memory_gib", float, "CPU memory of one server, GiB"),
    ("cluster.inter_node_gbps", float, "scale-out bandwidth per GPU, Gbit/s, one direction"),
    ("cluster.nvlink_gbps", float, "NVLink bandwidth per GPU, GB/s (vendor total)"),
    ("cluster.gpu_fp8", bool, "the GPU has FP8 tensor cores (GPU.peak_flops_fp8 set)"),
    ("cluster.gpu_bf16", bool, "the GPU has BF16 tensor cores (GPU.bf16; False on Volta)"),
    ("cluster.gpu_flash_attention", bool, "FlashAttention runs on the GPU (GPU.flash_attention; False on Volta)"),
    ("cluster.gpu_block_scaled", bool, "the GPU has block-scaled MX/NV tensor cores (GPU.peak_flops_fp4 set: Blackwell, MI355X)"),
    ("model.name", str, "model preset name or 'custom'"),
    ("model.params", int, "total parameters"),
    ("model.params_b", float, "total parameters, billions"),
    ("model.active_params_b", float, "parameters one token touches, billions (MoE top-k)"),
    ("model.layers", int, "transformer layers"),
    ("model.hidden", int, "hidden size"),
    ("model.heads", int, "attention heads"),
    ("model.kv_heads", int, "key/value heads (GQA groups)"),
    ("model.vocab", int, "vocabulary size"),
    ("model.is_moe", bool, "mixture-of-experts model"),
    ("model.experts", int, "routed experts per MoE layer (1 for dense)"),
    ("model.experts_per_token", int, "experts each token visits (top-k)"),
    ("training.seq_len", int, "tokens per sequence"),
    ("training.global_batch_size", int, "sequences per optimizer step"),
    ("training.tokens_per_step", int, "seq_len * global_batch_size"),
    ("training.precision", str, "bf16, fp16, fp8, fp8-delayed, fp8-cs, fp8-blockwise, mxfp8 or nvfp4"),
    ("training.gemm_format", str, "format of the linear-layer GEMMs: 16-bit, fp8 or fp4 (advisor.inputs.precision)"),
    ("training.precision_needs", str, "tensor cores the precision needs: none, fp8 or block-scaled"),
    ("training.flash_attention", bool, "FlashAttention-style kernels available"),
    ("training.cuda_graphs", bool, "the step replays captured CUDA graphs (Training.cuda_graphs)"),
    ("training.optimizer", str, "adam, adamw, adamw-8bit, paged-adamw-8bit, adafactor, sgd or lion (Training.optimizer)"),
    ("training.master_weights", str, "fp32 (a master copy of the trained weights) or none (Training.master_weights)"),
    ("training.task", str, "pretrain, sft, lora or qlora (advisor.inputs.finetune)"),
    ("training.frozen_base", bool, "the base weights are frozen: task lora or qlora"),
    ("training.framework", str, "the training stack the user stated (Training.framework: megatron-core, megatron-bridge, "
     "nemo, megatron-lm, megatron-deepspeed, deepspeed, hf-trl, hf-accelerate, torchtitan), or 'unstated'"),
    ("training.framework_version", str, "the stated stack's release as given (Training.framework_version), or 'unstated'"),
    ("training.framework_release", int, "the stated release as a number to compare: major * 1000 + minor of its first "
     "two numbers ('core_v0.16.1' -> 16, '25.11' -> 25011), 0 when unstated or without a number"),
    ("sizing.states_gib", float, "model states (weights, grads, Adam) without sharding, GiB; LoRA / QLoRA: "
     "the frozen base's weights plus the adapters' states"),
    ("sizing.full_states_gib", float, "model states if every weight trained (pretrain, full SFT), GiB"),
    ("sizing.states_gpu_ratio", float, "unsharded model states / one GPU's memory"),
    ("sizing.states_node_ratio", float, "unsharded model states / one server's GPU memory"),
    ("sizing.states_cluster_ratio", float, "unsharded model states / the cluster's GPU memory"),
    ("sizing.full_states_cluster_ratio", float, "model states if every weight trained / the cluster's GPU memory"),
    ("sizing.states_fit_gpu", bool, "unsharded model states fit in one GPU"),
    ("sizing.states_fit_node", bool, "model states fit in one server's GPU memory"),
    ("sizing.layer_gib", float, "one transformer layer's model states, GiB (largest layer)"),
    ("sizing.layer_fits_gpu", bool, "one layer's model states fit in one GPU"),
    ("model.max_position", int, "longest supported position (max_position_embeddings); when unknown the model's "
     "pretraining context, else training.seq_len"),
    ("model.position_embedding", str, "rope, learned (an absolute position table of max_position rows), alibi or none"),
    ("model.rope_theta_integer", bool, "the RoPE base (Model.rope_theta, default 10000) is a whole number"),
    ("model.rope_scaling", str, "RoPE frequency scaling: none, llama3, yarn, linear, dynamic or longrope"),
    ("model.mla", bool, "multi-head latent attention (DeepSeek-V2/V3)"),
    ("model.sparse_attention", bool, "DeepSeek Sparse Attention: a lightning indexer and top-k attention "
     "(Model.dsa_topk; DeepSeek-V3.2)"),
    ("model.latent_moe", bool, "LatentMoE: routed experts in a down-projected latent space (Model.moe_latent_size; "
     "Nemotron 3 Super)"),
    ("model.mtp_layers", int, "multi-token-prediction modules"),
    ("model.mamba_layers", int, "Mamba-2 layers of a hybrid stack (Model.hybrid_pattern 'M'); 0 otherwise"),
    ("model.gdn_layers", int, "Gated DeltaNet layers of a hybrid stack (Model.hybrid_pattern 'G'); 0 otherwise"),
    ("model.parallel_mixers", bool, "each Mamba-2 + attention pair of the hybrid stack runs in parallel on one input "
     "(Model.parallel_mixers, Falcon-H1)"),
    ("model.gqa", bool, "fewer key/value heads than query heads (grouped-query or multi-query attention)"),
    ("model.activation", str, "MLP activation: swiglu or gelu"),
    ("model.norm", str, "normalization: rmsnorm or layernorm"),
    ("model.bias", bool, "every linear layer carries a bias (GPT-2/3, BLOOM)"),
    ("model.qkv_bias", bool, "only the QKV projection carries a bias (Qwen2)"),
    ("model.qk_norm", bool, "a norm over each query and key head (Qwen3, Megatron-LM --qk-layernorm)"),
    ("model.attention_output_gate", bool, "a sigmoid gate on the attention output (Qwen3-Next)"),
    ("model.local_attention", bool, "some layers attend a window or a chunk of the context (Model.sliding_window, "
     "attention_chunk)"),
    ("model.attention_sinks", bool, "a learned sink logit per head (gpt-oss)"),
    # --- scope "layout": the layout under audit, and numbers derived from it -------------------
    ("layout.framework", str, "megatron, deepspeed, megatron+deepspeed or torchtitan"),
    ("layout.tp", int, "tensor-parallel degree"),
    ("layout.pp", int, "pipeline-parallel degree"),
    ("layout.dp", int, "data-parallel degree"),
    ("layout.cp", int, "context-parallel degree"),
    ("layout.ep", int, "expert-parallel degree"),
    ("layout.etp", int, "expert tensor-parallel degree (tp when not set)"),
    ("layout.vpp", int, "virtual pipeline stages per rank (1 = plain 1F1B)"),
    ("layout.sp", bool, "Megatron sequence parallelism"),
    ("layout.overlap_p2p_comm", bool, "Megatron --overlap-p2p-comm"),
    ("layout.zero_stage", int, "ZeRO stage (1 under Megatron = distributed optimizer)"),
    ("layout.micro_batch_size", int, "sequences per GPU per forward pass"),
    ("layout.num_microbatches", int, "micro-batches per step per pipeline, as given or derived"),
    ("layout.recompute", str, "none, selective or full"),
    ("layout.offload", str, "none, optimizer or optimizer+params"),
    ("layout.offload_device", str, "cpu or nvme"),
    ("check.world", int, "tp * pp * cp * dp"),
    ("check.world_matches", bool, "tp * pp * cp * dp == cluster.gpus"),
    ("check.world_mod_mp", int, "cluster.gpus % (tp * pp * cp)"),
    ("check.heads_mod_tp", int, "heads % tp"),
    ("check.heads_mod_cp", int, "heads % cp (DeepSpeed-Ulysses scatters attention heads over cp)"),
    ("check.mamba_shape_ok", bool, "tp divides the Mamba-2 heads and groups and cp the heads per TP rank "
     "(architecture.mamba_shape_ok); true without Mamba layers"),
    ("check.gdn_shape_ok", bool, "tp divides the Gated DeltaNet key and value heads and cp the heads per TP rank "
     "(architecture.gdn_shape_ok); true without Gated DeltaNet layers"),
    ("check.pp_split_needs_layout", bool, "pp splits the layers neither evenly nor as even middle stages between "
     "lighter first and last ones (inputs.pipeline.megatron_split is None): only --pipeline-model-parallel-layout "
     "can say it"),
    ("check.kv_heads_mod_tp", int, "kv_heads % tp"),
    ("check.tp_mod_kv_heads", int, "tp % kv_heads"),
    ("check.layers_mod_pp", int, "layers % pp"),
    ("check.layers_per_stage", int, "layers // pp"),
    ("check.layers_per_stage_mod_vpp", int, "(layers // pp) % vpp"),
    ("check.batch_mod_mbs_dp", int, "global_batch_size % (micro_batch_size * dp)"),
    ("check.batch_identity_holds", bool, "micro_batch_size * num_microbatches * dp == global_batch_size"),
    ("check.microbatches", int, "global_batch_size // (micro_batch_size * dp), or the given count"),
    ("check.microbatches_mod_pp", int, "microbatches % pp"),
    ("check.microbatches_below_pp", bool, "microbatches < pp: stages idle for part of every step"),
    ("check.batch_for_pp_microbatches", int, "the smallest global batch that gives every pipeline at least pp "
     "micro-batches at this micro-batch size and dp: pp * micro_batch_size * dp sequences"),
    ("check.batch_dp_most", int, "the most data-parallel replicas the global batch splits over on this cluster: "
     "gcd(global_batch_size, cluster.gpus)"),
    ("check.batch_forces_mp", int, "cluster.gpus / batch_dp_most: every layout's tp * pp * cp is a multiple of it"),
    ("check.batch_mp_outside_domain", bool, "cluster.nvlink_domain % batch_forces_mp != 0: tensor parallelism inside "
     "the domain cannot take the factor the batch forces, so part of it goes to the pipeline or context"),
    ("check.batch_forced_mp_unneeded", bool, "batch_mp_outside_domain, and a data-parallel layout alone (ZeRO-3, full "
     "recompute, one sequence per micro-batch, as many replicas as GPUs) fits by the estimate: the forced model "
     "parallelism is none the model needs"),
    ("check.batch_for_every_dp", int, "the smallest global batch of at least the given one that every data-parallel "
     "degree of the cluster splits: the next multiple of cluster.gpus"),
    ("check.seq_mod_2cp", int, "seq_len % (2 * cp)"),
    ("check.seq_mod_tp_2cp", int, "seq_len % (tp * 2 * cp) (torchtitan)"),
    ("check.experts_mod_ep", int, "experts % ep"),
    ("check.local_experts", int, "experts // ep: the routed experts each EP rank holds, one GEMM launch each"),
    ("check.world_mod_expert_grid", int, "cluster.gpus % (etp * ep * pp) (Megatron expert grid)"),
    ("check.dp_cp_tp_mod_ep", int, "(dp * cp * tp) % ep with the whole dp; no built-in rule reads it since "
     "torchtitan.ep-borrows-fsdp-and-tp v2, which counts FSDP ranks only (check.dp_shard_cp_tp_mod_ep)"),
    ("check.etp_equals_tp", bool, "etp == tp (the expert layers keep the dense layers' TP)"),
    ("check.torchtitan_dp_shard", int, "torchtitan's data_parallel_shard_degree as advisor exports it: dp when "
     "zero_stage >= 1 (FSDP), else 1 (ZeRO-0: dp is data_parallel_replicate_degree, DDP)"),
    ("check.ep_mod_cp", int, "ep % cp (torchtitan, etp == tp: EP borrows all of CP)"),
    ("check.dp_shard_cp_mod_ep", int, "(torchtitan_dp_shard * cp) % ep (torchtitan, etp == tp)"),
    ("check.ep_mod_cp_tp", int, "ep % (cp * tp) (torchtitan, etp == 1: EP borrows all of CP and TP)"),
    ("check.dp_shard_cp_tp_mod_ep", int, "(torchtitan_dp_shard * cp * tp) % ep (torchtitan, etp == 1)"),
    ("check.virtual_stages_fit", bool, "vpp == 1, pp == 1, or every one of the pp * vpp model chunks of the "
     "interleaved split (inputs.pipeline.virtual_stage_layers) gets a layer, the first chunk the embedding or "
     "the last one the loss at least"),
    ("check.pipeline_form", str, "how Megatron-LM is told the split (inputs.pipeline.PIPELINE_FORMS): even, "
     "first-last, account-embedding-loss, account-loss or layout; none when no split fits (virtual_stages_fit)"),
    ("check.model_chunks", int, "pp * vpp, the model chunks (virtual stages) of the pipeline"),
    ("check.pipeline_layers_counted", int, "layers + what the account forms count as layers (the embedding and "
     "the loss: + 2; the loss: + 1); layers otherwise"),
    ("check.chunk_layers", int, "pipeline_layers_counted // model_chunks: the layers per model chunk "
     "--num-layers-per-virtual-pipeline-stage says in the even and account forms"),
    ("check.lightest_rank_layers", int, "the fewest transformer layers a pipeline rank holds "
     "(inputs.pipeline.stage_layers)"),
    ("check.torchtitan_stages_fit", bool, "vpp <= 2, pp == 1, or some pipeline_parallel_layers_per_stage k gives "
     "ceil((layers + 2) / k) == pp * vpp stages (torchtitan pipeline_parallel.py)"),
    ("check.tp_times_ep", int, "etp * ep, the ranks of one expert all-to-all group"),
    ("check.bubble_percent", float, "pipeline bubble, 100 * (pp - 1) / (vpp * microbatches)"),
    ("check.vocab_padded", int, "vocab padded to a multiple of 128 * tp (Megatron M22)"),
    ("check.vocab_padding", int, "rows added by that padding"),
    ("check.seq_exceeds_max_position", bool, "training.seq_len > model.max_position"),
    ("check.tp_exceeds_nvlink_domain", bool, "tp > cluster.nvlink_domain"),
    ("check.ep_tp_exceeds_nvlink_domain", bool, "etp * ep > cluster.nvlink_domain"),
    ("check.memory_known", bool, "the cost model could estimate this layout"),
    ("check.memory_fits", bool, "estimated per-GPU memory fits the GPU"),
    ("check.memory_gib", float, "estimated per-GPU memory on the most-loaded rank, GiB"),
    ("check.capacity_gib", float, "GPU memory, GiB"),
    ("check.memory_percent", float, "estimated per-GPU memory as a percentage of the GPU's"),
    ("check.memory_headroom_percent", float, "share of GPU memory a layout must leave free by the estimate, percent "
     "(training.memory_headroom; default: the memory estimate's measured error, inputs.uncertainty)"),
    ("check.memory_tight", bool, "the layout fits, but leaves less than check.memory_headroom_percent of the GPU free"),
    ("check.host_fits", bool, "offloaded states fit in host memory (and NVMe, when its capacity is given)"),
    ("check.zero_only_fits", bool, "a ZeRO-2/3 data-parallel layout without TP/PP/CP fits (no offload)"),
    ("check.megatron_adam_expressible", bool, "Megatron-Core's Adam can hold assume.megatron_optimizer_bytes "
     "per parameter at this precision (precision.megatron_adam_dtypes)"),
    ("check.activation_offload_all_layers", bool, "assume.activation_offload_layers >= model.layers"),
    # --- scope "layout": the cost-model assumptions the estimate of this layout used (advisor.Assumptions);
    # the run settings among them must be expressible by the framework that runs the layout
    ("assume.moe_token_dispatcher", str, "alltoall or deepep (Assumptions.moe_token_dispatcher)"),
    ("assume.ep_a2a_overlap", bool, "EP all-to-all overlapped with compute (Assumptions.ep_a2a_overlap)"),
    ("assume.ep_overlap", float, "share of the MoE all-to-all hidden behind compute (Assumptions.ep_overlap)"),
    ("assume.tp_comm_overlap", bool, "TP communication overlap (Assumptions.tp_comm_overlap)"),
    ("assume.fp8_param_gather", bool, "weights kept in the low-precision format (Assumptions.fp8_param_gather)"),
    ("assume.activation_offload_layers", int, "layers whose activations go to the host (Assumptions.activation_offload_layers)"),
    ("assume.megatron_main_grad_bytes", float, "bytes per Megatron main-gradient element (Assumptions.megatron_main_grad_bytes)"),
    ("assume.megatron_optimizer_bytes", float, "Megatron optimizer-state bytes per parameter (Assumptions.megatron_optimizer_bytes)"),
    # --- scope "layout": the layout beside the advisor's own pick (audit(compare=True); else compared is false)
    ("versus.compared", bool, "the audit estimated the advisor's recommendation for the same situation"),
    ("versus.pick", str, "the recommended layout's id ('' when not compared)"),
    ("versus.pick_step_s", float, "the recommended layout's estimated step time, seconds"),
    ("versus.step_s", float, "this layout's estimated step time, seconds"),
    ("versus.slower_percent", float, "100 * (versus.step_s / versus.pick_step_s - 1)"),
    ("versus.band_percent", float, "the planner's near-tie band in percent: estimates closer than this are ties"),
    ("versus.beyond_band", bool, "versus.slower_percent > versus.band_percent"),
)

ASSUMED = tuple(name.split(".", 1)[1] for name in CATALOGUE if name.startswith("assume."))


def _round(x: float) -> float:
    # Facts are compared by rules and shown in messages; 4 decimals is plenty and keeps the
    # engine's JSON free of exponent-only floats (docs/architecture.md, the durable_rules traps).
    return round(x, 4)


def build_facts(cluster: Cluster, model: Model, training: Training) -> dict[str, dict[str, Any]]:
    """The fact document for one (cluster, model, resolved training) situation."""
    if training.seq_len is None or training.global_batch_size is None:
        raise ValueError("build_facts needs a resolved Training (see resolve_training)")
    counts = count_parameters(model)
    return {"cluster": _cluster_facts(cluster), "model": _model_facts(model, training, counts),
            "training": _training_facts(training), "sizing": _sizing_facts(cluster, model, training, counts)}


def _cluster_facts(cluster: Cluster) -> dict[str, Any]:
    gpu = cluster.gpu
    gpu_bytes = gpu.memory
    node_gpus = cluster.gpus_in_node
    return {
        "gpus": cluster.gpus,
        "gpus_per_node": cluster.gpus_per_node,
        "nodes": cluster.nodes,
        "nvlink_domain": min(cluster.nvlink_domain, cluster.gpus),
        "multi_node": cluster.gpus > cluster.gpus_per_node,
        "gpu_name": gpu.name,
        "gpu_memory_gib": _round(gpu_bytes / GIB),
        "node_memory_gib": _round(node_gpus * gpu_bytes / GIB),
        "cluster_memory_gib": _round(cluster.gpus * gpu_bytes / GIB),
        "host_memory_gib": _round(cluster.host_memory_per_node / GIB),
        "inter_node_gbps": _round(cluster.inter_node_bandwidth * 8 / 1e9),
        "nvlink_gbps": _round(cluster.intra_node_bandwidth / 1e9),
        "gpu_fp8": cluster.gpu.peak_flops_fp8 is not None,
        "gpu_block_scaled": cluster.gpu.peak_flops_fp4 is not None,
        "gpu_bf16": cluster.gpu.bf16,
        "gpu_flash_attention": cluster.gpu.flash_attention,
    }


def _model_facts(model: Model, training: Training, counts) -> dict[str, Any]:
    return {
        "name": model.name,
        "params": model.params,
        "params_b": _round(model.params / 1e9),
        "active_params_b": _round(counts.active / 1e9),
        "layers": model.layers,
        "hidden": model.hidden,
        "heads": model.heads,
        "kv_heads": model.kv_heads,
        "vocab": model.vocab,
        "is_moe": model.is_moe,
        "experts": model.experts,
        "experts_per_token": model.experts_per_token,
        "max_position": model.max_position or model.seq_len or training.seq_len,
        "position_embedding": model.position_embedding,
        "rope_theta_integer": float(model.rope_theta or 10000.0).is_integer(),
        "rope_scaling": model.rope_scaling,
        "mla": model.mla is not None,
        "sparse_attention": model.dsa_topk is not None,
        "latent_moe": model.moe_latent_size is not None,
        "mtp_layers": model.mtp_layers,
        "mamba_layers": (model.hybrid_pattern or "").count("M"),
        "gdn_layers": (model.hybrid_pattern or "").count("G"),
        "parallel_mixers": model.parallel_mixers,
        "gqa": model.kv_heads != model.heads,
        "activation": model.activation,
        "norm": model.norm,
        "bias": model.bias,
        "qkv_bias": model.qkv_bias and not model.bias,
        "qk_norm": model.qk_norm,
        "attention_output_gate": model.attention_output_gate,
        "local_attention": model.sliding_window is not None or model.attention_chunk is not None,
        "attention_sinks": model.attention_sinks,
    }


def _training_facts(training: Training) -> dict[str, Any]:
    return {
        "seq_len": training.seq_len,
        "global_batch_size": training.global_batch_size,
        "tokens_per_step": training.seq_len * training.global_batch_size,
        "precision": training.precision,
        "flash_attention": training.flash_attention,
        "cuda_graphs": training.cuda_graphs,
        "optimizer": training.optimizer,
        "master_weights": training.master_weights,
        "task": training.task,
        "frozen_base": training.frozen_base,
        "framework": training.framework or UNSTATED,
        "framework_version": training.framework_version or UNSTATED,
        "framework_release": release_number(training.framework_version),
        "gemm_format": recipe(training.precision).gemm,
        "precision_needs": recipe(training.precision).needs or "none",
    }


def _sizing_facts(cluster: Cluster, model: Model, training: Training, counts) -> dict[str, Any]:
    """Model-state bytes against one GPU, one node and the cluster, and whether one layer fits."""
    gpu_bytes = cluster.gpu.memory
    node_gpus = cluster.gpus_in_node
    per_param = state_bytes_per_param(training.precision, training.optimizer, training.master_weights, model.hidden)
    full_states = model.params * per_param
    states = full_states
    layer_states = counts.largest_layer * per_param
    if training.frozen_base:    # LoRA / QLoRA: a frozen base and trainable adapters (costmodel.adapters)
        states = finetune_state_bytes(model, counts, training, per_param)
        layer_states *= states / full_states
    return {
        "states_gib": _round(states / GIB),
        "full_states_gib": _round(full_states / GIB),
        "states_gpu_ratio": _round(states / gpu_bytes),
        "states_node_ratio": _round(states / (node_gpus * gpu_bytes)),
        "states_cluster_ratio": _round(states / (cluster.gpus * gpu_bytes)),
        "full_states_cluster_ratio": _round(full_states / (cluster.gpus * gpu_bytes)),
        "states_fit_gpu": states <= gpu_bytes,
        "states_fit_node": states <= node_gpus * gpu_bytes,
        "layer_gib": _round(layer_states / GIB),
        "layer_fits_gpu": layer_states <= gpu_bytes,
    }


def _pipeline_facts(layers: int, pp: int, vpp: int) -> dict[str, Any]:
    """check.pipeline_form and the counts its rules print (inputs.pipeline.pipeline_split)."""
    split = pipeline_split(layers, pp, vpp) if pp <= layers else None
    counted = layers + (split.accounted if split is not None else 0)
    return {"pipeline_form": split.form if split is not None else "none", "model_chunks": pp * vpp,
            "pipeline_layers_counted": counted, "chunk_layers": counted // (pp * vpp),
            "lightest_rank_layers": min(stage_layers(layers, pp)) if pp <= layers else 0}


def torchtitan_layers_per_stage(layers: int, pp: int, vpp: int) -> int | None:
    """torchtitan's pipeline_parallel_layers_per_stage for pp * vpp stages, or None when no k fits.

    torchtitan's pipeline_llm (torchtitan/distributed/pipeline_parallel.py, commit 02ef790c) makes
    ceil((layers + first_less + last_less) / k) stages, with first_less = last_less = 1 by default
    (the embedding and the output each count as one layer); the stages must be pp * vpp. The largest
    fitting k is taken (the fewest layers left over on the last stage)."""
    weight, stages = layers + 2, pp * vpp
    fits = [k for k in range(1, weight + 1) if -(-weight // k) == stages]
    return fits[-1] if fits else None


def release_number(version: str | None) -> int:
    """major * 1000 + minor of a release string's first two numbers, so that rules can compare releases
    ('0.9' < '0.15'); 0 when there is none."""
    numbers = re.findall(r"[0-9]+", version or "")      # ASCII digits: \d reads Arabic-Indic ones too
    if not numbers:
        return 0
    return int(numbers[0]) * 1000 + (int(numbers[1]) if len(numbers) > 1 else 0)


@dataclass(frozen=True)
class LayoutCase:
    """One layout judged in its situation: what `build_layout_facts` reads. `layout.dp` must be set.
    `memory`: the cost model's MemoryEstimate, or None when it could not be computed. `zero_only_fits`:
    the fact check.zero_only_fits (`zero_only_fits()`), which the caller sizes. `versus`: the advisor's
    own pick for the same situation, for the `versus.*` facts (else compared is false)."""
    cluster: Cluster
    model: Model
    training: Training
    layout: Layout
    memory: Any = None
    zero_only_fits: bool = False
    assumptions: Assumptions | None = None
    versus: Versus | None = None


def build_layout_facts(case: LayoutCase, situation: dict | None = None) -> dict[str, dict[str, Any]]:
    """Situation facts plus the `layout.*` and `check.*` groups for one layout under audit.

    Every quotient guards its divisor, so an illegal layout still yields facts (and every finding at
    once) instead of an exception. `situation`: build_facts(cluster, model, training) when the caller
    already has it (its groups are shared, not copied: read-only).
    """
    cluster, model, training, layout = case.cluster, case.model, case.training, case.layout
    facts = build_facts(cluster, model, training) if situation is None else dict(situation)
    facts["layout"] = _layout_group(layout, training)
    facts["check"] = _check_facts(case, facts["model"]["max_position"], facts["layout"]["num_microbatches"])
    assumptions = case.assumptions if case.assumptions is not None else Assumptions()
    facts["assume"] = {name: getattr(assumptions, name) for name in ASSUMED}
    facts["versus"] = case.versus.facts() if case.versus is not None else dict(_NOT_COMPARED)
    facts["check"]["activation_offload_all_layers"] = assumptions.activation_offload_layers >= model.layers
    facts["check"]["megatron_adam_expressible"] = megatron_adam_dtypes(assumptions.megatron_optimizer_bytes,
                                                                       training.precision) is not None
    return facts


def _layout_group(L: Layout, training: Training) -> dict[str, Any]:
    """The `layout.*` facts: the degrees and switches as given; num_microbatches derived from the batch
    when unset (0 when the batch is smaller than one micro-batch per replica)."""
    gbs, mbs, dp = training.global_batch_size, L.micro_batch_size, L.dp
    derived_m = gbs // (mbs * dp) if gbs >= mbs * dp else 0
    return {
        "framework": L.framework, "tp": L.tp, "pp": L.pp, "dp": dp, "cp": L.cp, "ep": L.ep, "etp": L.etp or L.tp,
        "vpp": L.vpp, "sp": L.sp, "overlap_p2p_comm": L.overlap_p2p_comm, "zero_stage": L.zero_stage,
        "micro_batch_size": mbs, "num_microbatches": L.num_microbatches or derived_m, "recompute": L.recompute,
        "offload": L.offload, "offload_device": L.offload_device,
    }


def _check_facts(case: LayoutCase, max_position: int, m: int) -> dict[str, Any]:
    """The `check.*` facts: the divisibility, fit and size checks the audit rules compare."""
    cluster, model, training, L = case.cluster, case.model, case.training, case.layout
    tp, pp, cp, dp, ep, vpp = L.tp, L.pp, L.cp, L.dp, L.ep, L.vpp
    etp = L.etp or tp
    gbs, seq, mbs = training.global_batch_size, training.seq_len, L.micro_batch_size
    per_stage = model.layers // pp
    dp_shard = dp if L.zero_stage >= 1 else 1      # advisor.export.torchtitan: ZeRO 1-3 run as FSDP
    pad = 128 * tp
    return {
        "world": tp * pp * cp * dp,
        "world_matches": tp * pp * cp * dp == cluster.gpus,
        "world_mod_mp": cluster.gpus % (tp * pp * cp),
        "heads_mod_tp": model.heads % tp,
        "heads_mod_cp": model.heads % cp,
        "kv_heads_mod_tp": model.kv_heads % tp,
        "pp_split_needs_layout": pp > 1 and megatron_split(model.layers, pp) is None,
        "mamba_shape_ok": ("M" not in (model.hybrid_pattern or "")
                           or mamba_shape_ok(model.mamba_heads, model.mamba_groups, tp, cp)),
        "gdn_shape_ok": ("G" not in (model.hybrid_pattern or "")
                         or gdn_shape_ok(model.gdn_value_heads, model.gdn_key_heads, tp, cp)),
        "tp_mod_kv_heads": tp % model.kv_heads,
        "layers_mod_pp": model.layers % pp,
        "layers_per_stage": per_stage,
        "layers_per_stage_mod_vpp": per_stage % vpp,
        "batch_mod_mbs_dp": gbs % (mbs * dp),
        "batch_identity_holds": mbs * m * dp == gbs,
        "microbatches": m,
        "microbatches_mod_pp": m % pp,
        "microbatches_below_pp": m < pp,
        "batch_for_pp_microbatches": pp * mbs * dp,
        **_batch_facts(case),
        "seq_mod_2cp": seq % (2 * cp),
        "seq_mod_tp_2cp": seq % (tp * 2 * cp),
        "experts_mod_ep": model.experts % ep,
        "local_experts": model.experts // ep,
        "world_mod_expert_grid": cluster.gpus % (etp * ep * pp),
        "dp_cp_tp_mod_ep": (dp * cp * tp) % ep,
        "etp_equals_tp": etp == tp,
        "torchtitan_dp_shard": dp_shard,
        "ep_mod_cp": ep % cp,
        "dp_shard_cp_mod_ep": (dp_shard * cp) % ep,
        "ep_mod_cp_tp": ep % (cp * tp),
        "dp_shard_cp_tp_mod_ep": (dp_shard * cp * tp) % ep,
        "virtual_stages_fit": vpp == 1 or pp == 1 or virtual_stage_layers(model.layers, pp, vpp) is not None,
        **_pipeline_facts(model.layers, pp, vpp),
        "torchtitan_stages_fit": vpp <= 2 or pp == 1 or torchtitan_layers_per_stage(model.layers, pp, vpp) is not None,
        "tp_times_ep": etp * ep,
        "bubble_percent": _round(100 * (pp - 1) / (vpp * m)) if m else 100.0,
        "vocab_padded": -(-model.vocab // pad) * pad,
        "vocab_padding": -(-model.vocab // pad) * pad - model.vocab,
        "seq_exceeds_max_position": seq > max_position,
        "tp_exceeds_nvlink_domain": tp > cluster.nvlink_domain,
        "ep_tp_exceeds_nvlink_domain": etp * ep > cluster.nvlink_domain,
        **_memory_facts(case),
        "zero_only_fits": case.zero_only_fits,
    }


def _batch_facts(case: LayoutCase) -> dict[str, Any]:
    """The check.batch_* facts of the data-parallel degrees the global batch allows on the cluster."""
    gpus, gbs = case.cluster.gpus, case.training.global_batch_size
    most = math.gcd(gbs, gpus)
    forced = gpus // most
    outside = min(case.cluster.nvlink_domain, gpus) % forced != 0
    every = -(-gbs // gpus) * gpus
    unneeded = outside and dp_only_fits(case.cluster, case.model, case.training.model_copy(
        update={"global_batch_size": every}), case.assumptions)
    return {"batch_dp_most": most, "batch_forces_mp": forced, "batch_mp_outside_domain": outside,
            "batch_forced_mp_unneeded": unneeded, "batch_for_every_dp": every}


def _memory_facts(case: LayoutCase) -> dict[str, Any]:
    """The memory `check.*` facts: the estimate against the GPU, and the headroom the audit allows."""
    cluster, memory, headroom = case.cluster, case.memory, memory_headroom(case.training)
    return {
        "memory_known": memory is not None,
        "memory_fits": bool(memory.fits) if memory is not None else True,
        "memory_gib": _round(memory.total / GIB) if memory is not None else 0.0,
        "capacity_gib": _round(cluster.gpu.memory / GIB),
        "memory_percent": _round(100 * memory.total / cluster.gpu.memory) if memory is not None else 0.0,
        "memory_headroom_percent": _round(100 * headroom),
        "memory_tight": memory is not None and bool(memory.fits) and memory.total > (1 - headroom) * memory.capacity,
        "host_fits": bool(memory.host_fits) if memory is not None else True,
    }
