"""How a layout splits a model's transformer layers over pipeline stages and virtual stages.

A property of the layout, not of the cost model: the planner searches over it, the cost model
sizes each stage by it, the explanation prints it and the Megatron-LM export writes the flags that
run it, so all four read it here.
"""

from __future__ import annotations

__all__ = ["megatron_split", "virtual_stage_layers", "stage_layers"]


def megatron_split(layers: int, pp: int) -> list[int] | None:
    """Transformer layers per pipeline stage as Megatron-LM runs them: an even split when pp divides
    layers (M8), else lighter first and last stages around even middle ones, the split
    --decoder-first/last-pipeline-num-layers express (arguments.py; Megatron requires the middle
    stages to split evenly). The middle stages take m = ceil(layers / pp) each and the first and last
    share the rest, the last taking the smaller half because it also computes the logits and the
    loss (and MTP): Llama 3 paper §3.3.2 removes a layer from the first and last stages of 126 on
    PP16 (7 | 8 x 14 | 7); NeMo's DeepSeek-V3 recipe runs 61 layers on PP16 as 3 | 4 x 14 | 2, the
    Megatron MoE model zoo as 4 | 4 x 14 | 1. None when no such split exists (the rest would leave a
    stage empty; Megatron then needs --pipeline-model-parallel-layout)."""
    if layers % pp == 0:
        return [layers // pp] * pp
    m = -(-layers // pp)
    rest = layers - m * (pp - 2)
    if rest < 2:
        return None
    last = rest // 2
    return [rest - last] + [m] * (pp - 2) + [last]


def virtual_stage_layers(layers: int, pp: int, vpp: int) -> list[int] | None:
    """Transformer layers per virtual pipeline stage, in model order (virtual stage i is model chunk
    i // pp of pipeline rank i % pp, Megatron's interleaved order), for an interleaved schedule over
    megatron_split's per-rank totals: each rank's layers in vpp chunks as even as can be, the
    smaller ones where the embedding (first rank, first chunk) and the loss (last rank, last chunk)
    sit. Even splits give L / (pp * vpp) everywhere (--num-layers-per-virtual-pipeline-stage);
    others need --pipeline-model-parallel-layout, which takes any per-stage counts (Megatron-LM
    arguments.py, _add_distributed_args). None when a rank has fewer layers than chunks."""
    split = megatron_split(layers, pp)
    if split is None or min(split) < vpp:
        return None
    chunks = []
    for k, total in enumerate(split):
        base, extra = divmod(total, vpp)
        sizes = [base + 1] * extra + [base] * (vpp - extra)      # larger first ...
        if k == 0:
            sizes.reverse()                                      # ... but the embedding's chunk small
        chunks.append(sizes)
    return [chunks[i % pp][i // pp] for i in range(pp * vpp)]


def stage_layers(layers: int, pp: int) -> list[int]:
    """Transformer layers per pipeline stage: megatron_split's where it exists; otherwise the remainder
    goes to the middle stages first, then the last, then the first (an approximation of a custom
    --pipeline-model-parallel-layout, or of DeepSpeed's PipelineModule balancing)."""
    split = megatron_split(layers, pp)
    if split is not None:
        return split
    base, extra = divmod(layers, pp)
    counts = [base] * pp
    order = list(range(1, pp - 1)) + ([pp - 1, 0] if pp > 1 else [0])
    for i in order[:extra]:
        counts[i] += 1
    return counts
