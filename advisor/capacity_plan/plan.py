"""`capacity()`: from tokens to train and a deadline or a budget to GPU types, counts, layouts, time
and cost.

For each GPU type and each count it tries (`counts.tiling_counts`) it asks `recommend` for the
layout at that count, with the global batch that count allows (`inputs.batch.batch_for`), and turns the
estimated step time into days to train (with the goodput of `scaling.goodput_at`), GPU-hours and
cost. Then it marks the options that meet the goal, the Pareto front, and the pick (`choose`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple

from ..auditor import call_options
from ..costmodel.assumptions import as_assumptions
from ..errors import InputError
from ..inputs.batch import batch_for
from ..inputs.coerce import as_model, as_training, coerce
from ..inputs.specs import Cluster, Model, Training, part_defaults, resolve_training
from ..results.recommendation import Recommendation
from .bounds import bounds
from .choose import fronts, meets, verdict
from .counts import parse_counts, tiling_counts
from .goal import Goal, GpuType, as_budget, as_deadline_days, as_gpu_types, as_tokens
from .prices import Prices, as_prices
from .result import CapacityOption, CapacityPlan, Pick, Rejected, Work
from .scaling import Scaling, checkpoint_bytes, peak_flops_for, training_time
from .sweep import Outcome, RecommendArgs, Scenario, run_scenarios

__all__ = ["capacity"]

MAX_SCENARIOS = 100_000
"""GPU types x counts one call may try (64 types at their default counts are ~1,500)."""
_MAX_BATCH_SEQS = 1 << 24          # Training.global_batch_size's bound
_SHARE_WORTH_NAMING = 0.10


class _Run(NamedTuple):
    """What every option of one plan shares."""

    tokens: int
    seq_len: int
    base_seqs: int
    max_seqs: int
    checkpoint_bytes: float
    scaling: Scaling
    prices: Prices | None
    given: Training       # the job as stated (what each GPU type may still decide: part_defaults)


class _Tried(NamedTuple):
    gpu_type: GpuType
    gpus: int
    batch: int


def capacity(model: Any, *, tokens: Any, gpu: Any = "H100-SXM-80GB", gpus: Any = None, deadline: Any = None,
             budget: Any = None, prices: Any = None, training: Any = None, scaling: Any = None,
             rules: str | Path | tuple | list | None = (), engine: str | None = None, assumptions: Any = None,
             workers: int | None = None, progress: Callable[[int, int], None] | None = None) -> CapacityPlan:
    """GPU types and counts to train `tokens` of `model`, each with its layout, days, GPU-hours and cost.

    `gpu`: a GPU preset name, an advisor.GPU, or a dict of Cluster fields without `gpus`, or a list of
    them. `gpus`: the counts to try: a range "8..16384" (default; the counts in it that tile nodes and
    the NVLink domain), a list of counts, or one. `deadline`: days, or "30 days", "6 weeks". `budget`:
    in the prices' currency, or GPU-hours without prices. `prices`: a Prices, a dict of its fields or
    a TOML file (none are shipped). `training`: as for recommend; its global batch, when given, stays
    fixed. `scaling`: an advisor.Scaling or a dict of its fields (the batch limit, interruptions,
    restarts, checkpoints). `rules`, `engine`, `assumptions`: passed to every recommend. `workers`:
    processes (None: automatic). `progress(done, total)` is called as counts finish."""
    model, given = as_model(model), as_training(training)
    resolved, _notes = resolve_training(model, given)
    price_table = as_prices(prices)
    unit = price_table.currency if price_table is not None else "GPU-hours"
    goal = Goal(as_deadline_days(deadline), as_budget(budget, unit), unit)
    run = _run_setup(model, given, resolved, as_tokens(tokens), _as_scaling(scaling), price_table)
    types = as_gpu_types(gpu)
    if price_table is not None:
        for gpu_type in types:
            price_table.per_gpu_hour(gpu_type.name)
    tried, scenarios, rejected = _scenarios(types, parse_counts(gpus), run, given)
    paths, engine = call_options(rules, engine)              # bad rules or engine: one error, before the sweep
    args = RecommendArgs(model, paths, engine, as_assumptions(assumptions))
    outcomes = run_scenarios(args, scenarios, workers=workers, progress=progress)
    counted = len(tried) + len(rejected)            # the counts refused before any recommend, and the rest
    drafts = []
    for item, outcome in zip(tried, outcomes):
        result = _judge(item, outcome, run)
        (rejected if isinstance(result, Rejected) else drafts).append(result)
    return _plan(model, resolved, run, goal, drafts, rejected, types, counted)


def _precision_text(given: Training, resolved: Training, types: list[GpuType]) -> str:
    """The plan's precision: the job's, and the GPU types that run another one because the job left it
    to them (inputs.specs.part_defaults: fp16 on a part without BF16 tensor cores)."""
    own = [f"{t.name} {p}" for t in types if (p := part_defaults(t.probe.gpu, given)[0].get("precision"))]
    return resolved.precision + (f" ({', '.join(own)})" if own else "")


def _as_scaling(value: Any) -> Scaling:
    if value is None:
        return Scaling()
    return coerce(value, Scaling, "scaling", "an advisor.Scaling or a dict of its fields")


def _run_setup(model: Model, given: Training, resolved: Training, tokens: int, scaling: Scaling,
               prices: Prices | None) -> _Run:
    seq = resolved.seq_len
    base = resolved.global_batch_size
    most = scaling.max_batch(base * seq, given.global_batch_size is not None)
    if most < seq:
        raise InputError("Scaling.max_batch_tokens", most, f"at least one sequence ({seq} tokens)")
    max_seqs = min(max(base, most // seq), _MAX_BATCH_SEQS)
    return _Run(tokens, seq, base, max_seqs, checkpoint_bytes(model, resolved), scaling, prices, given)


def _scenarios(types: list[GpuType], spec, run: _Run, given: Training):
    counts = [tiling_counts(spec, t.probe.gpus_per_node, t.probe.nvlink_domain) for t in types]
    if sum(map(len, counts)) > MAX_SCENARIOS:
        raise InputError("gpus", f"{sum(map(len, counts))} GPU types x counts", f"at most {MAX_SCENARIOS}")
    tried, scenarios, rejected = [], [], []
    for gpu_type, its_counts in zip(types, counts):
        probe = gpu_type.probe
        for count in its_counts:
            if count > probe.gpus_per_node and count % probe.gpus_per_node:
                rejected.append(Rejected(gpu=gpu_type.name, gpus=count, reason="not-whole-nodes",
                                         why=f"{count} GPUs are not whole nodes of {probe.gpus_per_node}"))
                continue
            batch = batch_for(count, run.base_seqs, run.max_seqs).sequences
            fields = {**gpu_type.fields, "gpu": probe.gpu, "gpus": count}
            if probe.profile is not None:
                fields["profile"] = probe.profile
            training = given.model_copy(update={"global_batch_size": batch})     # recommend resolves the rest
            tried.append(_Tried(gpu_type, count, batch))
            scenarios.append(Scenario(Cluster(**fields), training))
    return tried, scenarios, rejected


def _judge(item: _Tried, outcome: Outcome, run: _Run) -> CapacityOption | Rejected:
    name, count = item.gpu_type.name, item.gpus
    if outcome.error is not None:
        first = str(outcome.error).splitlines()[0] if str(outcome.error) else type(outcome.error).__name__
        return Rejected(gpu=name, gpus=count, reason="input", why=first)
    rec = outcome.recommendation
    if rec.status != "recommended":
        reason, why = _infeasible(rec, count, item.batch)
        return Rejected(gpu=name, gpus=count, reason=reason, why=why)
    est = rec.estimates
    batch_tokens = item.batch * run.seq_len
    timing = training_time(est.step_time, count, run.tokens, batch_tokens, run.checkpoint_bytes, run.scaling)
    good = timing.goodput
    if good.fraction <= 0:
        return Rejected(gpu=name, gpus=count, reason="interruptions",
                        why=f"{good.interruptions_per_day:.1f} interruptions a day leave no time to train between "
                            f"restarts ({run.scaling.restart_minutes:g} min each) and checkpoints")
    days, gpu_hours = timing.days, timing.gpu_hours
    price = run.prices.per_gpu_hour(name) if run.prices is not None else None
    return CapacityOption(
        gpu=name, gpus=count, nodes=rec.cluster.nodes, layout=rec.layout.id, framework=rec.framework,
        offload=rec.layout.offload != "none", global_batch_size=item.batch, batch_tokens=batch_tokens,
        step_time_s=est.step_time, steps=timing.steps, mfu=est.mfu, memory_gib=est.memory.total / 2**30,
        bubble_fraction=est.bubble_time / est.step_time, exposed_comm_fraction=est.exposed_comm_ratio,
        interruptions_per_day=good.interruptions_per_day, goodput=good.fraction, days=days, gpu_hours=gpu_hours,
        cost=gpu_hours * price if price is not None else None, meets=True, pareto=False,
        limited_by=_limited_by(est, good.fraction), recommendation=rec)


def _limited_by(est, goodput: float) -> str:
    shares = [(est.bubble_time / est.step_time, "the pipeline bubble", "of the step"),
              (est.exposed_comm_ratio, "exposed communication", "of the step"),
              (est.optimizer_time / est.step_time, "the optimizer step", "of the step"),
              (1.0 - goodput, "interruptions and checkpoints", "of the wall time")]
    share, what, of = max(shares, key=lambda s: s[0])
    return f"{what} ({share:.0%} {of})" if share >= _SHARE_WORTH_NAMING else "compute"


def _infeasible(rec: Recommendation, count: int, batch: int) -> tuple[str, str]:
    rejects = [e for e in rec.trace.events if e.op == "reject"]
    illegal = [e for e in rejects if e.rule_id]
    memory = [e for e in rejects if e.have is not None and e.want is not None and not e.rule_id]
    if illegal:
        return "no-legal-layout", f"every layout that fits is refused: {illegal[0].message}"
    if memory:
        least = min(memory, key=lambda e: e.have)
        return "does-not-fit", f"the smallest layout needs {least.message.split(': ', 1)[-1]}"
    if count > batch:
        return "batch-too-small", (f"{batch} sequences per step are fewer than {count} GPUs, and no split of a "
                                   "sequence over the rest (TP, PP, CP) is legal for this model")
    why = rejects[0].message if rejects else "no layout was found"
    return "no-legal-layout", why


def _plan(model: Model, resolved: Training, run: _Run, goal: Goal, drafts: list[CapacityOption],
          rejected: list[Rejected], types: list[GpuType], tried: int) -> CapacityPlan:
    drafts = [d.model_copy(update={"meets": meets(d, goal)}) for d in drafts]
    front = fronts(drafts, run.prices is not None)
    options = [d.model_copy(update={"pareto": i in front}) for i, d in enumerate(drafts)]
    chosen = verdict(options, goal)
    pick = None
    if chosen.pick is not None:
        option = options[chosen.pick]
        pick = Pick(option=option, why=chosen.why, recommendation=option.recommendation)
    work = _work(options, run, resolved, types)
    return CapacityPlan(
        model=model.name, params=model.params, precision=_precision_text(run.given, resolved, types),
        deadline_days=goal.deadline_days,
        budget=goal.budget, budget_unit=goal.budget_unit if goal.budget is not None else None,
        currency=run.prices.currency if run.prices else None, prices_source=run.prices.source if run.prices else None,
        scaling=run.scaling, work=work, options=options, rejected=sorted(rejected, key=lambda r: (r.gpu, r.gpus)),
        pick=pick, shortfall=chosen.shortfall, why=chosen.why,
        bounds=bounds(options, rejected, run, [t.probe for t in types]), counts_tried=tried)


def _work(options: list[CapacityOption], run: _Run, resolved: Training, types: list[GpuType]) -> Work:
    if not options:
        return Work(tokens=run.tokens, seq_len=run.seq_len, flops_per_token=None, flops=None, floor_gpu_hours={})
    first = options[0]
    per_token = first.recommendation.estimates.model_flops / first.batch_tokens
    flops = per_token * run.tokens
    floors = {t.name: flops / peak_flops_for(t.probe.gpu, resolved.precision) / 3600.0 for t in types}
    return Work(tokens=run.tokens, seq_len=run.seq_len, flops_per_token=per_token, flops=flops, floor_gpu_hours=floors)
