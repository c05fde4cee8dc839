"""The batch arithmetic every exporter shares: a layout's resolved (dp, micro-batch, micro-batches,
global batch, sequence), and the refusal an exporter raises for a layout the audit forbids.

Unresolved inputs (dp, num_microbatches, seq_len or global_batch_size still None) and a batch that
breaks the identity are input errors, raised here for every framework.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Training

__all__ = ["Batch", "resolved", "refused", "no_cuda_graphs"]


def refused(field: str, have: object, want: str, rule_id: str, why: str) -> InputError:
    """The error an exporter raises for a layout that audit rule `rule_id` forbids: the exporter only
    asserts the audit's contract (a layout `advisor.audit` calls ok always exports), so the message
    names the rule that owns the decision."""
    return InputError(field, have, want, f"forbidden by audit rule {rule_id}: {why}")


@dataclass(frozen=True)
class Batch:
    dp: int
    mbs: int
    m: int
    gbs: int
    seq: int


def resolved(layout: Layout, training: Training, cluster: Cluster) -> Batch:
    """The batch the configs write; raises InputError naming the field for unresolved or inconsistent inputs."""
    if layout.dp is None:
        raise InputError("Layout.dp", None, "the data-parallel degree",
                         f"use layout.for_world({cluster.gpus}) first")
    if layout.num_microbatches is None:
        raise InputError("Layout.num_microbatches", None, "an int (micro-batches per step per pipeline)",
                         "derive it as global_batch_size // (micro_batch_size * dp)")
    if training.seq_len is None:
        raise InputError("Training.seq_len", None, "an int", "resolve Training against the model first")
    if training.global_batch_size is None:
        raise InputError("Training.global_batch_size", None, "an int", "resolve Training against the model first")
    if layout.world() != cluster.gpus:
        raise InputError(
            "Layout.dp", layout.dp, f"a layout covering all {cluster.gpus} GPUs of the cluster",
            f"{layout.degree_formula(cluster.gpus)} (audit rule layout.world-size-product)",
        )
    b = Batch(layout.dp, layout.micro_batch_size, layout.num_microbatches,
              training.global_batch_size, training.seq_len)
    product = b.mbs * b.m * b.dp
    if product != b.gbs:
        raise InputError(
            "Training.global_batch_size", b.gbs,
            f"micro_batch_size({b.mbs}) * num_microbatches({b.m}) * dp({b.dp}) = {product}",
            "the batch identity train_batch = micro x accumulation x dp (Megatron, DeepSpeed and "
            "torchtitan all check it; audit rule layout.batch-identity)",
        )
    return b


def no_cuda_graphs(layout: Layout, training: Training) -> None:
    """The frameworks whose training step has no CUDA-graph capture refuse an estimate that assumed it."""
    if training.cuda_graphs and layout.framework != "megatron":
        raise refused("Training.cuda_graphs", True, f"False under {layout.framework}", "layout.cuda-graphs-need-megatron",
                      "only Megatron-LM captures the training step (--cuda-graph-impl local)")
