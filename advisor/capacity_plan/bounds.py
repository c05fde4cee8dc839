"""What bounds scaling, stated for one plan with its figures: the batch (how many data-parallel
replicas it allows), the memory floor (the fewest GPUs that fit), the network, the pipeline bubble
at small batches per replica, goodput at scale, and where adding GPUs stops paying."""

from __future__ import annotations

from typing import Any

from ..inputs.specs import Cluster
from ..inputs.units import format_bytes
from .choose import fmt_days
from .result import Bound, CapacityOption, Rejected
from .scaling import DEFAULT_MAX_BATCH_TOKENS, LLAMA3_DAYS, LLAMA3_GPUS, LLAMA3_INTERRUPTIONS, goodput_at

__all__ = ["bounds"]

_LLAMA3 = "Grattafiori et al. 2024, The Llama 3 Herd of Models, arXiv 2407.21783"


def _tokens(n: float) -> str:
    return f"{n / 2**20:,.1f}M tokens" if n >= 2**20 else f"{n / 2**10:,.0f}k tokens"


def bounds(options: list[CapacityOption], rejected: list[Rejected], run: Any, probes: list[Cluster]) -> list[Bound]:
    """The Bound list of a plan (run: plan._Run)."""
    out = [_batch(run)]
    out += [b for b in (_memory(options, rejected, probe) for probe in probes) if b is not None]
    out += [b for b in (_network(options, probe) for probe in probes) if b is not None]
    if options:
        out.append(_bubble(options))
        out.append(_goodput(options, run))
    out += [b for b in (_scaling_stops(options, probe) for probe in probes) if b is not None]
    return out


def _batch(run) -> Bound:
    seq, base, most = run.seq_len, run.base_seqs, run.max_seqs
    if most > base:
        grows = (f"grows with the GPU count to a sequence per GPU per step and to a multiple of the largest "
                 f"divisor of the count it can be, up to {most:,} sequences ({_tokens(most * seq)})")
    else:
        grows = "stays fixed (it was given; Scaling.max_batch_tokens lets it grow)"
    default = run.scaling.max_batch_tokens is None and most * seq >= DEFAULT_MAX_BATCH_TOKENS
    source = f"{_LLAMA3}, §3.4.1 (4M -> 8M -> 16M tokens)" if default else None
    return Bound(name="batch", source=source,
                 text=f"the global batch starts at {base:,} sequences of {seq:,} tokens ({_tokens(base * seq)}) and "
                      f"{grows}: at most {most:,} data-parallel replicas of one sequence each; past {most:,} GPUs "
                      "every replica spans several GPUs (TP, PP, CP), and past what those splits allow a count "
                      "is rejected as batch-too-small")


def _memory(options: list[CapacityOption], rejected: list[Rejected], probe: Cluster) -> Bound | None:
    name = probe.gpu.name
    fit = sorted(o.gpus for o in options if o.gpu == name)
    on_gpus = sorted(o.gpus for o in options if o.gpu == name and not o.offload)
    short = [r.gpus for r in rejected if r.gpu == name and r.reason == "does-not-fit"]
    if not fit and not short:
        return None
    if not fit:
        text = f"{name}: nothing fits up to {max(short):,} GPUs of {format_bytes(probe.gpu.memory)}"
    else:
        text = f"{name}: the fewest GPUs tried that fit: {fit[0]:,}"
        if on_gpus and on_gpus[0] != fit[0]:
            text += f" (offloading model states to host memory or NVMe below {on_gpus[0]:,})"
        elif not on_gpus:
            text += " (every count offloads model states to host memory or NVMe)"
        if short:
            text += f"; {max(short):,} GPUs of {format_bytes(probe.gpu.memory)} do not"
    return Bound(name="memory", text=text)


def _network(options: list[CapacityOption], probe: Cluster) -> Bound | None:
    mine = [o for o in options if o.gpu == probe.gpu.name]
    if not mine:
        return None
    worst = max(mine, key=lambda o: (o.exposed_comm_fraction, -o.gpus))
    gbit = probe.inter_node_bandwidth * 8 / 1e9
    peak = f"exposed communication peaks at {worst.exposed_comm_fraction:.0%} of the step at {worst.gpus:,} GPUs" \
        if worst.exposed_comm_fraction >= 0.005 else "no option leaves communication exposed"
    return Bound(name="network",
                 text=f"{probe.gpu.name}: {gbit:,.0f} Gbit/s per GPU to the scale-out network, NVLink domains of "
                      f"{probe.nvlink_domain} GPUs (Cluster.inter_node_bandwidth, nvlink_domain); {peak}")


def _bubble(options: list[CapacityOption]) -> Bound:
    worst = max(options, key=lambda o: (o.bubble_fraction, -o.gpus))
    if worst.bubble_fraction < 0.005:
        return Bound(name="bubble", text="no option has a pipeline bubble: the batch gives every pipeline enough "
                                         "micro-batches, or the layouts need no pipeline")
    est = worst.recommendation.estimates
    per_replica = worst.global_batch_size / max(1, est.dp)
    return Bound(name="bubble",
                 text=f"the pipeline bubble peaks at {worst.bubble_fraction:.0%} of the step at {worst.gpus:,} x "
                      f"{worst.gpu} ({worst.layout}), where each data-parallel replica gets {per_replica:,.0f} "
                      f"sequences a step, {est.num_microbatches:,} micro-batches to fill its pipeline",
                 source="Narayanan et al. 2021, arXiv 2104.04473, §2.2: bubble (p - 1) / (v m)")


def _goodput(options: list[CapacityOption], run) -> Bound:
    largest = max(options, key=lambda o: o.gpus)
    good = goodput_at(largest.gpus, run.checkpoint_bytes, largest.step_time_s, run.scaling)
    s = run.scaling
    default = s.interruptions_per_gpu_day == LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * LLAMA3_GPUS)
    source = (f"{_LLAMA3}, §3.3.4: {LLAMA3_INTERRUPTIONS} interruptions in {LLAMA3_DAYS} days on "
              f"{LLAMA3_GPUS:,} H100s" if default else "Scaling.interruptions_per_gpu_day, as given")
    interval = "every step" if good.interval_seconds <= largest.step_time_s else \
        f"every {good.interval_seconds / 60:,.0f} min"
    return Bound(name="goodput", source=source,
                 text=f"{s.interruptions_per_gpu_day:.2e} interruptions per GPU per day: "
                      f"{good.interruptions_per_day:,.1f} a day at {largest.gpus:,} GPUs, each costing a "
                      f"{s.restart_minutes:g}-minute restart and half a checkpoint interval; a "
                      f"{format_bytes(run.checkpoint_bytes)} checkpoint {interval} "
                      f"({good.checkpoint_seconds:,.1f} s to save at "
                      f"{s.checkpoint_bandwidth / 1e6:,.0f} MB/s per GPU): goodput {good.fraction:.1%}")


def _scaling_stops(options: list[CapacityOption], probe: Cluster) -> Bound | None:
    mine = sorted((o for o in options if o.gpu == probe.gpu.name), key=lambda o: o.gpus)
    if len(mine) < 2:
        return None
    fastest = min(mine, key=lambda o: (o.days, o.gpus))
    if fastest is mine[-1]:
        text = (f"{probe.gpu.name}: time to train still falls at the most GPUs tried, {fastest.gpus:,} "
                f"({fmt_days(fastest.days)}), limited by {fastest.limited_by}")
    else:
        after = mine[mine.index(fastest) + 1]
        text = (f"{probe.gpu.name}: adding GPUs stops shortening the run at {fastest.gpus:,} "
                f"({fmt_days(fastest.days)}); at {after.gpus:,} it takes {fmt_days(after.days)}, limited by "
                f"{after.limited_by}")
    return Bound(name="scaling", text=text)
