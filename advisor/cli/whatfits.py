"""When no layout fits: the smallest changes that would, each found by running the planner again on
the changed inputs — more GPUs (the fewest that fit, doubling up to 64x), a shorter
sequence (halving, down to 1k tokens), where a precision was stated the GPU's own, a global batch the
GPU count divides, and, where a stack was stated, any stack. CP, recompute and
offload are the planner's own dimensions: it already tried them for the inputs as given, so the lines
say which of them the fitting layout uses. No figure here is guessed: each is a recommendation's.
"""

from __future__ import annotations

from ..results.recommendation import FitChange as Change

MAX_GPU_FACTOR = 64         # at most 64x the GPUs given
MIN_SEQ_LEN = 1024          # no shorter sequence is tried


def what_would_fit(cluster, model, training, options: dict) -> list[Change]:
    """The changes that make a layout fit, smallest of each kind; `options` are recommend's keywords
    (rules, engine, assumptions)."""
    changes = [_more_gpus(cluster, model, training, options), _shorter_sequence(cluster, model, training, options)]
    if "precision" in training.model_fields_set:
        changes.append(_default_precision(cluster, model, training, options))
    changes.append(_splitting_batch(cluster, model, training, options))
    if training.framework is not None:
        changes.append(_try("any stack (no --framework)", cluster, model,
                            _training(training, framework=None, framework_version=None), options))
    return [change for change in changes if change is not None]


def _try(what: str, cluster, model, training, options: dict) -> Change | None:
    from ..api import recommend
    from ..errors import AdvisorError

    try:
        rec = recommend(cluster, model, training, **options)
    except AdvisorError:                # the changed inputs are not valid (e.g. a count no node tiles)
        return None
    if rec.status != "recommended" or rec.layout is None:
        return None
    return Change(what=what, layout_id=rec.layout.id, memory_gib=rec.memory.total / 2**30,
                  capacity_gib=rec.memory.capacity / 2**30)


def _more_gpus(cluster, model, training, options: dict) -> Change | None:
    from ..inputs.bounds import MAX_GPUS
    from ..inputs.specs import Cluster

    per_node = cluster.gpus_per_node
    count = cluster.gpus
    while count < cluster.gpus * MAX_GPU_FACTOR and count * 2 <= MAX_GPUS:
        count *= 2
        if count > per_node and count % per_node:
            count = -(-count // per_node) * per_node          # whole nodes
        fields = {**cluster.model_dump(exclude_unset=True), "gpus": count}
        change = _try(f"{count} GPUs", Cluster(**fields), model, training, options)
        if change is not None:
            return change
    return None


def _shorter_sequence(cluster, model, training, options: dict) -> Change | None:
    from ..inputs.specs import resolve_training

    seq = resolve_training(model, training)[0].seq_len
    while seq // 2 >= MIN_SEQ_LEN:
        seq //= 2
        change = _try(f"seq {seq}", cluster, model, _training(training, seq_len=seq), options)
        if change is not None:
            return change
    return None


def _default_precision(cluster, model, training, options: dict) -> Change | None:
    """The GPU's own precision (bf16, or fp16 without BF16 tensor cores: inputs.specs.part_defaults) for a
    stated one the GPU may not run (FP8 on an A100, NVFP4 before Blackwell)."""
    from ..inputs.specs import Training, part_defaults

    unstated = Training()
    own = part_defaults(cluster.gpu, unstated)[0].get("precision", unstated.precision)
    if own == training.precision:
        return None
    return _try(f"precision {own}", cluster, model, _training(training, precision=None), options)


def _splitting_batch(cluster, model, training, options: dict) -> Change | None:
    """The smallest global batch of whole sequences per GPU at or above the job's, when the GPU count does
    not divide it (the data-parallel degree must divide the batch: 128 sequences on 512 GPUs leave 4 GPUs
    per sequence to model parallelism)."""
    from ..inputs.specs import resolve_training

    batch = resolve_training(model, training, cluster)[0].global_batch_size
    if batch % cluster.gpus == 0:
        return None
    split = -(-batch // cluster.gpus) * cluster.gpus
    return _try(f"global batch {split}", cluster, model, _training(training, global_batch_size=split), options)


def _training(training, **updates):
    """`training` with some fields changed, the rest as the user gave them (derived ones derive again)."""
    from ..inputs.specs import Training

    fields = {**training.model_dump(exclude_unset=True), **updates}
    return Training(**{key: value for key, value in fields.items() if value is not None or key not in updates})


def what_would_fit_text(changes: list[Change]) -> str:
    """The lines the text output adds under "No layout fits"."""
    if not changes:
        return (f"What would fit: nothing within {MAX_GPU_FACTOR}x the GPUs or down to a {MIN_SEQ_LEN}-token "
                "sequence (each tried with the planner)")
    lines = ["What would fit (each change alone, each planned and estimated again):"]
    lines += [f"  - {c.what}: {c.layout_id} ({c.memory_gib:.1f} of {c.capacity_gib:.1f} GiB per GPU)"
              for c in changes]
    return "\n".join(lines)
