"""The planner's trace wording: why a layout does not fit, what came closest, what an offloaded
layout's time rests on, and what the search sized. Auditors read these texts: reword with care."""

from __future__ import annotations

from ..costmodel import Assumptions, Estimate
from ..costmodel.sizing import Sized
from ..inputs.layout import Layout
from ..inputs.pipeline import pipeline_split
from ..inputs.specs import Cluster, Model
from .candidates import Candidate, Closest
from .events import PlanEvent
from ..inputs.uncertainty import EXPERT_MEMORY_SHARE, MEMORY_ERROR, STEP_TIME_ERROR
from ..results.render import OVER_PREFERENCE
from .ranking import CRITERIA, TIE_WORDS, Ties


def host_need(sized: Sized) -> float:
    """Host memory per GPU the offloaded states need, with DeepSpeed's buffer factor (bytes)."""
    return sized.host_bytes * sized.assumptions.host_buffer_factor


def need_and_capacity(sized: Sized) -> tuple[float, float]:
    """What a layout that does not fit needs and has, bytes per GPU: GPU memory, or when the GPU
    has room, host memory (NVMe, for states offloaded there)."""
    if not sized.fits:
        return sized.total, sized.capacity
    if sized.ctx.offload_device == "nvme":
        return sized.nvme_bytes, sized.ctx.nvme_per_gpu
    return host_need(sized), sized.ctx.host_per_gpu


def shortfall(sized: Sized) -> float:
    """How far a layout that does not fit is from fitting: the share of its memory it needs."""
    need, capacity = need_and_capacity(sized)
    return need / capacity


def short_of(sized: Sized, recompute: str) -> str:
    """Why a layout does not fit, at its most frugal recompute level: GPU memory, else host memory."""
    if not sized.fits:
        return (f"memory: {sized.total / 2**30:.1f} GiB per GPU > {sized.capacity / 2**30:.1f} GiB even with "
                f"recompute {recompute}")
    if sized.ctx.offload_device == "nvme":
        return nvme_short(sized)
    return host_short(sized) + "; NVMe offload needs ZeRO-3"


def nvme_short(sized: Sized) -> str:
    return (f"NVMe: {sized.nvme_bytes / 2**30:,.0f} GiB per GPU of offloaded states > {sized.ctx.nvme_per_gpu / 2**30:,.0f} "
            f"GiB of NVMe per GPU (Cluster.nvme_per_node)")


def host_short(sized: Sized) -> str:
    what = "optimizer states and parameters" if sized.ctx.offload == "optimizer+params" else "optimizer states"
    return (f"host memory: offloading the {what} needs {host_need(sized) / 2**30:.1f} GiB per GPU "
            f"(x{sized.assumptions.host_buffer_factor:g} for buffers) > {sized.ctx.host_per_gpu / 2**30:.1f} GiB of "
            f"host memory per GPU")


def needs(closest: Closest) -> str:
    """'<id> needs ...' for the layout that came closest to fitting."""
    layout, sized = closest.layout, closest.sized
    if not sized.fits:
        return f"{layout.id} needs {sized.total / 2**30:.1f} GiB of {sized.capacity / 2**30:.1f} GiB"
    if sized.ctx.offload_device == "nvme":
        return f"{layout.id} fits the GPU but not its NVMe: {nvme_short(sized)}"
    return (f"{layout.id} fits the GPU but needs {host_need(sized) / 2**30:.1f} GiB of host memory per GPU "
            f"of {sized.ctx.host_per_gpu / 2**30:.1f} GiB")


def offload_basis(cluster: Cluster, layout: Layout, est: Estimate, A: Assumptions) -> str:
    """What an offloaded layout's time rests on: host figures the cost model assumes rather than
    measures (Assumptions.pcie_bandwidth, cpu_adam_params_per_second, nvme_bandwidth), and how much of
    the step they decide, so that a reader knows which of their own numbers to pass."""
    figures = [f"PCIe {A.pcie_bandwidth / 1e9:.0f} GB/s per GPU (pcie_bandwidth)",
               f"CPU Adam {A.cpu_adam_params_per_second:.2g} parameters/s per GPU (cpu_adam_params_per_second)"]
    if layout.offload_device == "nvme":
        figures.append(f"NVMe {A.nvme_bandwidth / 1e9:.0f} GB/s per GPU (nvme_bandwidth)")
        if cluster.nvme_per_node is None:
            capacity = "(its capacity is not checked: give Cluster.nvme_per_node)"
        else:
            capacity = f"of {cluster.nvme_per_node / cluster.gpus_in_node / 2**30:,.0f} GiB"
        figures.append(f"{est.memory.offloaded_to_nvme / 2**30:,.0f} GiB per GPU on NVMe {capacity}")
    return (f"The best offloaded layout, {layout.id}, spends {est.optimizer_time:.2f} s of its {est.step_time:.2f} s "
            f"step in the optimizer and its transfers, at host figures assumed from others' measurements, not yours: "
            + ", ".join(figures) + "; pass your hosts' figures as assumptions")


def margins(ties: Ties) -> tuple[str, str]:
    """The memory margin and the near-tie band as the trace states them, each with its source."""
    headroom = 1 - ties.tight
    why = ("the memory estimate's measured error" if abs(headroom - MEMORY_ERROR.value) < 1e-9
           else "training.memory_headroom")
    memory = f"leave less than {headroom:.1%} of it free, {why}"
    band = (f"ties within {ties.band:.1%} (the step-time estimate's measured error, its median over "
            f"{STEP_TIME_ERROR.n} measured runs) go to {TIE_WORDS[ties.order]}")
    if any(c.name == "headroom" for c in CRITERIA[ties.order]):
        band += (f" (memory headroom: at most {ties.roomy:.0%} of the GPU, as 85 in 100 of "
                 f"{EXPERT_MEMORY_SHARE.n} published expert layouts use)")
    return memory, band


def advice_move_note(first: Candidate, chosen: Candidate, ties: Ties) -> str:
    """Why the choice is not the tie-break's first: that layout draws audit advice the choice avoids."""
    avoided = sorted({r for r, _ in first.advice or ()} - {r for r, _ in chosen.advice or ()})
    return (f"advice moved the choice: {first.layout.id} (est. {first.step_time:.2f} s) comes first by the "
            f"tie-break but draws the audit's {', '.join(avoided)}; {chosen.layout.id} (est. "
            f"{chosen.step_time:.2f} s), within {ties.band:.1%} of the fastest, does not")


def advice_note(rule_id: str, message: str, chosen: Candidate, best: Candidate | None, kept: set[str],
                ties: Ties, fastest: float) -> str:
    """Why the choice keeps an advice of its own audit: no near-tie avoids it, and what the fastest
    layout without it would cost (`best`, None when no layout that fits avoids it). `fastest`: the
    step time the near-tie band is measured from."""
    head = (f"the audit's advice {rule_id} stands on the choice ({message}): no layout within "
            f"{ties.band:.1%} of the fastest ({fastest:.2f} s) avoids it without drawing other advice")
    if best is None:
        return head + "; no layout that fits avoids it"
    t, ours = best.step_time, chosen.step_time
    text = f"{head}; the fastest without it, {best.layout.id}, is est. {t:.2f} s ({t / ours - 1:+.0%} on the choice)"
    other = sorted({r for r, _ in best.advice or ()} - kept)
    if other:
        return text + f" and draws {', '.join(other)}"
    if best.tight and not chosen.tight:
        return text + f", leaving less than {1 - ties.tight:.1%} of GPU memory free"
    return text


def preference_set_aside(features: dict[str, str], used: str) -> PlanEvent | None:
    """When the rules enabled several near-tie preferences (`features`: feature -> rule id), the note
    that the one the search uses stands over the others, so that no rule's words read as the tie order."""
    aside = [f for f in CRITERIA if f != used and f in features and features[f] != features.get(used)]
    if used not in features or not aside:
        return None
    others = "; ".join(f"rule {features[f]}'s ({f}: {TIE_WORDS[f]})" for f in aside)
    return PlanEvent("note", f"among near-ties, rule {features[used]}'s preference ({used}: {TIE_WORDS[used]}) "
                             f"{OVER_PREFERENCE} {others}", rule_id=features[used], kind="preference")


def note_search(found: list[Candidate], floors: dict, variants: dict, tried: set, ties: Ties) -> list[PlanEvent]:
    """What a search sized: the layouts that fit and how they rank, the shapes and variants sized."""
    n_tight = sum(c.tight for c in found)
    memory, band = margins(ties)
    n_variants = sum(len(v) for b, v in variants.items() if b in floors)
    shapes = "1 shape fits; {} of its" if len(floors) == 1 else f"{len(floors)} shapes fit; {{}} of their"
    return [PlanEvent("note", f"{len(found)} layouts fit in memory ({n_tight} {memory}, ranked last); "
                              f"ranked by estimated step time; {band}", kind="search"),
            PlanEvent("note", shapes.format(len([t for t in tried if t.base in floors])) +
                      f" {n_variants} (micro-batch, vpp) variants sized; the others' floors (compute, "
                      f"unhidden communication, least bubble) cannot change the choice")]


def pipeline_note(layout: Layout, model: Model) -> str | None:
    """Why the chosen interleaved layout's split counts the embedding and the loss as layers,
    or None: the first and last ranks, which also run the embedding and the logits and loss, hold a
    layer less, so the pipeline interleaves in more chunks than their decoder layers alone would give."""
    if layout.framework != "megatron" or layout.vpp == 1:
        return None
    split = pipeline_split(model.layers, layout.pp, layout.vpp)
    if split is None or not split.form.startswith("account"):
        return None
    both = split.accounted == 2
    counted = "the embedding and the loss" if both else "the loss"
    flags = ("--account-for-embedding-in-pipeline-split " if both else "") + "--account-for-loss-in-pipeline-split"
    r = split.ranks
    ranks = f"{r[0]} | {r[1]} x {len(r) - 2} | {r[-1]}" if len(r) > 2 else " | ".join(map(str, r))
    return (f"{layout.id}: its pipeline counts {counted} as layers, {model.layers} + {split.accounted} = "
            f"{model.layers + split.accounted} over pp {layout.pp} x vpp {layout.vpp} model chunks of "
            f"{split.per_chunk}, "
            f"so the ranks that also run the embedding or the logits and loss hold a layer less ({ranks}) and every "
            f"chunk the same load; Megatron-Core runs it with {flags}")
