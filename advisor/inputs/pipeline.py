"""How a layout splits a model's transformer layers over pipeline stages and virtual stages.

A property of the layout, not of the cost model: the planner searches over it, the cost model
sizes each stage by it, the explanation prints it and the Megatron-LM export writes the flags that
run it, so all four read it here.

Megatron-Core places the input embedding in the first virtual stage (pipeline rank 0, model chunk 0)
and the output layer with the loss in the last (rank pp - 1, chunk vpp - 1), whatever the split
(megatron/core/transformer/pipeline_parallel_layer_layout.py validate_layer_layout: the flattened
layout starts with the embedding and ends with the loss). It can also count them as layers of the
split (TransformerConfig.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split),
so that the chunk holding one of them builds one decoder layer less, none when a chunk is one layer
(transformer_block.py get_num_layers_to_build: "the embedding (or loss) layer cannot function as a
standalone transformer layer ... reduce the number of layers to construct by 1"). NVIDIA/Megatron-LM
@ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (main) and 55ac7082517c3878ae653c07c09c534b8aed49f6
(core_v0.16.1), the same code at both.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["PipelineForm", "PipelineSplit", "PIPELINE_FORMS", "megatron_split", "virtual_stage_layers",
           "stage_layers", "pipeline_split"]

PipelineForm = Literal["even", "first-last", "account-embedding-loss", "account-loss", "layout"]
PIPELINE_FORMS: tuple[str, ...] = PipelineForm.__args__
"""How Megatron-LM is told a split (the export writes it; audit rule megatron.pipeline-split-release
says which releases have each):
- "even": every (virtual) stage the same decoder layers: nothing, or --num-layers-per-virtual-pipeline-stage;
- "first-last": plain 1F1B with lighter first and last stages around even middle ones:
  --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers (Megatron-Core 0.9 on);
- "account-embedding-loss", "account-loss": every model chunk the same number of layers once the
  embedding and the loss (or the loss alone) count as one: --account-for-embedding-in-pipeline-split
  and / or --account-for-loss-in-pipeline-split with --num-layers-per-virtual-pipeline-stage
  (Megatron-Core 0.11 on);
- "layout": any other split, --pipeline-model-parallel-layout (Megatron-Core 0.13 on)."""


class PipelineSplit(NamedTuple):
    """The split a (layers, pp, vpp) layout implies: decoder layers per pipeline rank, per virtual
    stage in model order (virtual stage i is model chunk i // pp of rank i % pp, Megatron's interleaved
    order; `ranks` again when vpp is 1), and the form that tells Megatron-LM (PIPELINE_FORMS).
    `accounted` is what the account forms count as layers besides the decoder layers (2: embedding and
    loss, 1: the loss, else 0)."""
    ranks: tuple[int, ...]
    chunks: tuple[int, ...]
    form: str
    accounted: int

    @property
    def per_chunk(self) -> int:
        """Layers per model chunk as --num-layers-per-virtual-pipeline-stage counts them (the embedding
        and loss included in the account forms)."""
        return (sum(self.chunks) + self.accounted) // len(self.chunks)


def megatron_split(layers: int, pp: int) -> list[int] | None:
    """Transformer layers per pipeline stage as Megatron-LM runs them: an even split when pp divides
    layers (M8), else lighter first and last stages around even middle ones, the split
    --decoder-first/last-pipeline-num-layers express (arguments.py; Megatron requires the middle
    stages to split evenly). The middle stages take m = ceil(layers / pp) each and the first and last
    share the rest, the last taking the smaller half because it also computes the logits and the
    loss (and MTP): Llama 3 paper §3.3.2 removes a layer from the first and last stages of 126 on
    PP16 (7 | 8 x 14 | 7); NeMo's DeepSeek-V3 recipe runs 61 layers on PP16 as 3 | 4 x 14 | 2, the
    Megatron MoE model zoo as 4 | 4 x 14 | 1. Where layers + 2 (or + 1) splits evenly over pp this
    is the split of Megatron's embedding and loss accounting (7 | 8 x 14 | 7 is 128 / 16 less the
    embedding and the loss). None when no such split exists (the rest would leave a stage empty;
    Megatron then needs --pipeline-model-parallel-layout)."""
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
    sit. Those two chunks may hold no decoder layer, the embedding or the loss being their work (a
    first or last rank of vpp - 1 layers; Megatron-Core runs such a chunk, get_num_layers_to_build
    returning 0 there); every other chunk holds one at least. Even splits give L / (pp * vpp)
    everywhere (--num-layers-per-virtual-pipeline-stage); the others are the account forms or
    --pipeline-model-parallel-layout, which takes any per-stage counts (pipeline_split). None when a
    rank has too few layers for its chunks."""
    split = megatron_split(layers, pp)
    if split is None:
        return None
    chunks = []
    for k, total in enumerate(split):
        need = vpp - 1 if k in (0, pp - 1) else vpp     # the embedding's or the loss's chunk may hold no layer
        if total < need:
            return None
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


def _accounted_chunks(layers: int, chunks: int, accounted: int) -> list[int] | None:
    """Megatron-Core's chunks with the embedding and the loss (accounted = 2) or the loss alone (1)
    counted as layers: (layers + accounted) / chunks each, one less where they sit
    (transformer_block.py get_num_layers_to_build); None when that does not divide."""
    if (layers + accounted) % chunks:
        return None
    per = (layers + accounted) // chunks
    sizes = [per] * chunks
    sizes[-1] -= 1                   # the loss
    if accounted == 2:
        sizes[0] -= 1                # the embedding
    return sizes if min(sizes) >= 0 else None


def pipeline_split(layers: int, pp: int, vpp: int = 1) -> PipelineSplit | None:
    """The split of `layers` decoder layers over pp ranks of vpp model chunks each that the cost model
    estimates and the Megatron export writes, and its form; None when some chunk would hold nothing
    (virtual_stage_layers). Megatron-DeepSpeed and torchtitan split by their own rules."""
    if pp == 1:
        return PipelineSplit((layers,), (layers,), "even", 0)
    if vpp == 1:
        ranks = tuple(stage_layers(layers, pp))
        form = "even" if layers % pp == 0 else "first-last" if megatron_split(layers, pp) is not None else "layout"
        return PipelineSplit(ranks, ranks, form, 0)
    sizes = virtual_stage_layers(layers, pp, vpp)
    if sizes is None:
        return None
    ranks = tuple(sum(sizes[j * pp + k] for j in range(vpp)) for k in range(pp))
    if layers % (pp * vpp) == 0:
        return PipelineSplit(ranks, tuple(sizes), "even", 0)
    for accounted, form in ((2, "account-embedding-loss"), (1, "account-loss")):
        if _accounted_chunks(layers, pp * vpp, accounted) == sizes:
            return PipelineSplit(ranks, tuple(sizes), form, accounted)
    return PipelineSplit(ranks, tuple(sizes), "layout", 0)
