"""Capacity planning (issue 33): advisor.capacity and `advisor capacity`.

Invariants stated as properties: no option's GPU-hours fall below the work at the dense peak,
whatever the count; a deadline no option meets is reported with the fastest option and by how
much it misses; the pick meets the deadline whenever any option does, and is the cheapest that
does. The sweep's worker processes give the same plan as the serial path.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor.capacity_plan import CapacityPlan, Scaling, capacity, load_prices
from advisor.capacity_plan.choose import money, pareto_front, verdict
from advisor.capacity_plan.counts import parse_counts, tiling_counts
from advisor.capacity_plan.goal import Goal, as_deadline_days, as_tokens
from advisor.capacity_plan.prices import as_prices
from advisor.capacity_plan.result import CapacityOption
from advisor.inputs.batch import batch_for, divisors
from advisor.capacity_plan.scaling import (LLAMA3_DAYS, LLAMA3_INTERRUPTIONS, checkpoint_bytes,
                                           goodput_at, peak_flops_for)
from advisor.cli import _ProgressBar, main
from advisor.planner.ranking import NEAR_TIE
from advisor.errors import InputError, RuleFileError

SMALL = dict(model="llama-3-8b", tokens="1T", gpu="H100", gpus="8..64", workers=1)


@pytest.fixture(scope="module")
def plan() -> CapacityPlan:
    return capacity(**SMALL, deadline=30)


# ------------------------------------------------------------------------------------------------
# The counts tried, the batch and goodput


def test_default_counts_tile_nodes_and_the_nvlink_domain():
    assert tiling_counts(parse_counts(None), 8, 8)[:8] == (8, 16, 24, 32, 48, 64, 96, 128)
    assert tiling_counts(parse_counts(None), 8, 8)[-1] == 16384
    rack = tiling_counts(parse_counts(None), 4, 72)           # GB200 NVL72: 4-GPU trays, 72-GPU domains
    assert rack[:6] == (8, 12, 24, 36, 72, 144) and all(c % 72 == 0 for c in rack if c >= 72)
    assert tiling_counts(parse_counts("1..8"), 8, 8) == (1, 2, 4, 8)
    assert tiling_counts(parse_counts("48,64"), 8, 8) == (48, 64)
    assert parse_counts(range(8, 33, 8)).listed == (8, 16, 24, 32)


@pytest.mark.parametrize("bad", ["64..8", "0", "lots", [], True, 2**40, "8..x"])
def test_bad_counts_name_the_field(bad):
    with pytest.raises(InputError) as err:
        parse_counts(bad)
    assert err.value.field == "gpus"


@given(gpus=st.integers(1, 1 << 20), base=st.integers(1, 4096), most=st.integers(1, 1 << 16))
def test_the_batch_grows_toward_one_sequence_per_gpu_and_splits_over_the_count(gpus, base, most):
    chosen = batch_for(gpus, base, most)
    batch, ceiling = chosen.sequences, max(most, base)
    assert base <= batch <= ceiling                                   # never below the base, never past the limit
    assert batch >= min(gpus, ceiling)                                # a sequence per GPU where the limit allows
    assert gpus % chosen.divides == 0 and batch % chosen.divides == 0
    want = max(base, min(gpus, ceiling))
    assert batch - chosen.divides < want                              # the smallest such multiple
    assert all(-(-want // d) * d > ceiling for d in divisors(gpus) if d > chosen.divides)   # the largest divisor


def test_llama3_statistics_give_its_interruption_rate():
    good = goodput_at(16384, 0.0, 1.0, Scaling())
    assert good.interruptions_per_day == pytest.approx(LLAMA3_INTERRUPTIONS / LLAMA3_DAYS)
    assert goodput_at(16384, 0.0, 1.0, Scaling(interruptions_per_gpu_day=0)).fraction == 1.0


@given(small=st.integers(1, 8192), factor=st.integers(2, 16), ckpt=st.floats(0, 1e13), step=st.floats(0.01, 100))
def test_goodput_falls_as_the_job_grows(small, factor, ckpt, step):
    a, b = goodput_at(small, ckpt, step, Scaling()), goodput_at(small * factor, ckpt, step, Scaling())
    assert 0.0 <= b.fraction <= a.fraction <= 1.0
    assert b.interruptions_per_day == pytest.approx(a.interruptions_per_day * factor)


def test_checkpoint_holds_weights_and_optimizer_states():
    model = advisor.Model.preset("llama-3-8b")
    assert checkpoint_bytes(model, advisor.Training()) == pytest.approx(model.params * 14)   # 2 + 4 + 8
    lora = checkpoint_bytes(model, advisor.Training(task="lora"))
    assert 0 < lora < model.params * 0.1


@pytest.mark.parametrize("text, days", [(30, 30.0), ("30 days", 30.0), ("6 weeks", 42.0), ("720 h", 30.0),
                                        ("2.5d", 2.5), ("3 months", 90.0)])
def test_deadlines_read_with_their_units(text, days):
    assert as_deadline_days(text) == pytest.approx(days)


@pytest.mark.parametrize("bad", ["soon", -1, 0, "30 parsecs", math.inf, True])
def test_bad_deadline_names_the_field(bad):
    with pytest.raises(InputError) as err:
        as_deadline_days(bad)
    assert err.value.field == "deadline"


def test_tokens_read_with_decimal_suffixes():
    assert as_tokens("1T") == 10**12 and as_tokens("15.6T") == 15_600_000_000_000 and as_tokens(2e12) == 2 * 10**12
    with pytest.raises(InputError) as err:
        as_tokens("lots")
    assert err.value.field == "tokens"


# ------------------------------------------------------------------------------------------------
# The plan


def test_every_option_is_a_full_recommendation(plan):
    assert plan.options and plan.counts_tried == 6
    for option in plan.options:
        rec = option.recommendation
        assert rec.status == "recommended" and rec.layout.id == option.layout and rec.cluster.gpus == option.gpus
        assert option.step_time_s == rec.estimates.step_time and option.mfu == rec.estimates.mfu
        assert option.days == pytest.approx(option.steps * option.step_time_s / option.goodput / 86400)
        assert option.gpu_hours == pytest.approx(option.days * 24 * option.gpus)
        assert option.steps == pytest.approx(10**12 / option.batch_tokens)


def test_the_pick_is_the_cheapest_option_that_meets_the_deadline(plan):
    meeting = [o for o in plan.options if o.days <= 30]
    assert plan.pick is not None and plan.pick.option.meets and plan.pick.option.days <= 30
    assert plan.pick.option.gpu_hours <= min(o.gpu_hours for o in meeting) * (1 + NEAR_TIE)
    assert plan.pick.recommendation.layout.id == plan.pick.option.layout
    assert "cheapest" in plan.pick.why and plan.shortfall is None


def test_an_unmeetable_deadline_says_so_and_by_how_much(plan):
    fastest = min(plan.options, key=lambda o: o.days)
    short = capacity(**SMALL, deadline=fastest.days / 2)
    assert short.pick is None and short.shortfall is not None
    assert short.shortfall.constraint == "deadline" and short.shortfall.closest.gpus == fastest.gpus
    assert short.shortfall.days_over == pytest.approx(fastest.days - fastest.days / 2)
    assert "no option meets the deadline" in short.why and "past the deadline" in short.why
    assert f"{fastest.gpus} x" in short.why and "(100%)" in short.why


def test_no_goal_gives_no_pick_but_names_the_fastest_and_the_cheapest(plan):
    free = capacity(**SMALL)
    assert free.pick is None and free.shortfall is None and all(o.meets for o in free.options)
    assert "no deadline or budget" in free.why


def test_the_work_and_its_floor(plan):
    work = plan.work
    first = plan.options[0].recommendation.estimates
    assert work.flops_per_token == pytest.approx(first.model_flops / plan.options[0].batch_tokens)
    peak = advisor.GPU(**__import__("advisor.inputs.presets", fromlist=["gpu"]).gpu("H100")).peak_flops
    assert work.floor_gpu_hours["H100-SXM-80GB"] == pytest.approx(work.flops / peak / 3600)


@settings(max_examples=8, deadline=None)
@given(model=st.sampled_from(["llama-3-8b", "qwen2.5-7b", "llama-2-13b"]),
       gpu=st.sampled_from(["H100", "A100-80GB", "B200", "GB200"]),
       counts=st.lists(st.sampled_from([8, 16, 24, 32, 64, 128, 512, 2048, 8192]), min_size=1, max_size=3, unique=True),
       precision=st.sampled_from(["bf16", "fp8"]))
def test_more_gpus_never_lower_gpu_hours_below_the_work_at_peak(model, gpu, counts, precision):
    if precision == "fp8" and gpu == "A100-80GB":
        precision = "bf16"
    plan = capacity(model, tokens="100B", gpu=gpu, gpus=counts, training={"precision": precision}, workers=1)
    floor = plan.work.floor_gpu_hours
    for option in plan.options:
        assert option.gpu_hours >= floor[option.gpu] * (1 - 1e-9), (option.gpus, option.gpu_hours, floor)
        rec = option.recommendation
        gpu_spec = rec.cluster.gpu
        assert rec.estimates.model_flops / (option.step_time_s * option.gpus) <= peak_flops_for(gpu_spec, precision)


def _options(draw_values) -> list[CapacityOption]:
    return [CapacityOption(gpu="X", gpus=8 * (i + 1), nodes=i + 1, layout=f"tp1-dp{i}", framework="megatron",
                           offload=False, global_batch_size=512, batch_tokens=2**22, step_time_s=1.0, steps=1.0,
                           mfu=0.5, memory_gib=10.0, bubble_fraction=0.0, exposed_comm_fraction=0.0,
                           interruptions_per_day=0.0, goodput=1.0, days=days, gpu_hours=hours, cost=None, meets=True,
                           pareto=False, limited_by="compute") for i, (days, hours) in enumerate(draw_values)]


def _marked(options, goal):
    from advisor.capacity_plan.choose import meets
    return [o.model_copy(update={"meets": meets(o, goal)}) for o in options]


@given(values=st.lists(st.tuples(st.floats(0.1, 1000), st.floats(1, 1e7)), min_size=1, max_size=12),
       deadline=st.floats(0.05, 2000), budget=st.one_of(st.none(), st.floats(1, 2e7)))
def test_the_pick_meets_the_goal_whenever_any_option_does(values, deadline, budget):
    goal = Goal(deadline, budget, "GPU-hours")
    options = _marked(_options(values), goal)
    result = verdict(options, goal)
    meeting = [o for o in options if o.days <= deadline and (budget is None or o.gpu_hours <= budget)]
    if meeting:
        picked = options[result.pick]
        assert picked.meets and picked.days <= deadline
        cheapest = min(money(o) for o in meeting)          # or within the estimate's error of it, on fewer GPUs
        assert money(picked) == cheapest or (money(picked) <= cheapest * (1 + NEAR_TIE) and picked.gpus <= min(
            o.gpus for o in meeting if money(o) == cheapest))
        assert result.shortfall is None
    else:
        assert result.pick is None and result.shortfall is not None
        if not any(o.days <= deadline for o in options):
            fastest = min(o.days for o in options)
            assert result.shortfall.days_over == pytest.approx(fastest - deadline)
            assert result.shortfall.closest.days == fastest


@given(values=st.lists(st.tuples(st.floats(0.1, 1000), st.floats(1, 1e7)), min_size=1, max_size=12),
       budget=st.floats(1, 2e7))
def test_the_pick_within_a_budget_is_the_fastest_that_fits_it(values, budget):
    goal = Goal(None, budget, "GPU-hours")
    options = _marked(_options(values), goal)
    result = verdict(options, goal)
    fitting = [o for o in options if o.gpu_hours <= budget]
    if fitting:
        fastest = min(o.days for o in fitting)
        assert options[result.pick].meets and options[result.pick].days <= fastest * (1 + NEAR_TIE)
    else:
        cheapest = min(o.gpu_hours for o in options)
        assert result.shortfall.over_budget == pytest.approx(cheapest - budget)


@given(values=st.lists(st.tuples(st.floats(0.1, 1000), st.floats(1, 1e7)), min_size=1, max_size=12))
def test_the_pareto_front_holds_exactly_the_undominated(values):
    options = _options(values)
    front = pareto_front(options)
    for i, o in enumerate(options):
        dominated = any(p.days <= o.days and p.gpu_hours <= o.gpu_hours
                        and (p.days, p.gpu_hours) != (o.days, o.gpu_hours) for p in options)
        if dominated:
            assert i not in front
    assert front and min(o.days for o in options) in {options[i].days for i in front}


def test_near_ties_in_cost_go_to_the_fewest_gpus():
    # data-parallel B200 runs of 32 to 2,048 GPUs cost the same GPU-hours within 1%: the pick is the
    # smallest allocation that meets the deadline, not the one a rounding error made cheapest
    tied = capacity("llama-3-8b", tokens="1T", gpu="B200", gpus="16..2048", deadline=30, workers=1)
    meeting = [o for o in tied.options if o.meets]
    cheapest = min(meeting, key=lambda o: o.gpu_hours)
    near = [o for o in meeting if o.gpu_hours <= cheapest.gpu_hours * (1 + NEAR_TIE)]
    assert tied.pick.option.gpus == min(o.gpus for o in near)
    assert len(near) > 1 and (tied.pick.option == cheapest or f"within the estimate's {NEAR_TIE:.0%}" in tied.pick.why)


def test_rejections_say_why():
    tiny = capacity("llama-3-70b", tokens="1T", gpu="V100-16GB", gpus=[1], workers=1)
    assert [(r.gpus, r.reason) for r in tiny.rejected] == [(1, "does-not-fit")] and not tiny.options
    assert "GiB" in tiny.rejected[0].why and tiny.pick is None
    odd = capacity("llama-3-8b", tokens="1T", gpu="H100", gpus=[12], workers=1)
    assert odd.rejected[0].reason == "not-whole-nodes"
    starved = capacity("llama-3-8b", tokens="1T", gpu="H100", gpus=[4096], workers=1,
                       training={"global_batch_size": 1, "seq_len": 8192})
    assert starved.rejected[0].reason == "batch-too-small" and "1 sequences" in starved.rejected[0].why


def test_bad_rules_engine_or_assumptions_fail_once_before_the_sweep(tmp_path):
    bad = tmp_path / "site.toml"
    bad.write_text('[[rule]]\nid = "x"\n')
    with pytest.raises(RuleFileError):
        capacity(**SMALL, rules=[bad])
    with pytest.raises(InputError):
        capacity(**SMALL, assumptions={"nope": 1})
    with pytest.raises(InputError):
        capacity(**SMALL, engine="clips")


def test_a_gpu_that_cannot_run_the_precision_is_rejected_with_the_rule():
    plan = capacity("llama-3-8b", tokens="1T", gpu=["A100-80GB", "H100"], gpus=[8], training={"precision": "fp8"},
                    workers=1)
    assert [o.gpu for o in plan.options] == ["H100-SXM-80GB"]
    assert plan.rejected[0].reason == "no-legal-layout" and "fp8" in plan.rejected[0].why


def test_a_stated_batch_stays_fixed_and_the_default_one_grows():
    fixed = capacity("llama-3-8b", tokens="1T", gpu="H100", gpus=[8, 1024], training={"global_batch_size": 256},
                     workers=1)
    assert {o.global_batch_size for o in fixed.options} == {256}
    grown = capacity("llama-3-8b", tokens="1T", gpu="H100", gpus=[8, 1024, 4096], workers=1)
    assert [o.global_batch_size for o in grown.options] == [512, 1024, 2048]     # 16M tokens / 8192 at most
    capped = capacity("llama-3-8b", tokens="1T", gpu="H100", gpus=[1024], scaling={"max_batch_tokens": "4M"},
                      workers=1)
    assert capped.options[0].global_batch_size == 512


def test_scaling_overrides_are_validated():
    with pytest.raises(InputError) as err:
        capacity(**SMALL, scaling={"restart_minutes": -1})
    assert "restart_minutes" in err.value.field
    with pytest.raises(InputError):
        capacity(**SMALL, scaling={"interruption_rate": 1})


def test_parallel_workers_give_the_serial_answer():
    kw = dict(model="llama-3-8b", tokens="2T", gpu=["H100", "A100-80GB"], gpus="8..1024", deadline=20)
    serial, parallel = capacity(**kw, workers=1), capacity(**kw, workers=2)
    assert serial.counts_tried >= 24
    assert parallel.model_dump_json() == serial.model_dump_json()
    for a, b in zip(serial.options, parallel.options):
        assert a.recommendation.model_dump_json() == b.recommendation.model_dump_json()


def test_concurrent_calls_from_threads_agree():
    results = [None, None]

    def work(i):
        results[i] = capacity(**SMALL, deadline=30).model_dump_json()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0] == results[1] is not None


def test_progress_is_reported_to_the_end():
    seen = []
    capacity(**SMALL, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (6, 6) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_progress_bar_draws_on_stderr_and_clears(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    bar = _ProgressBar()
    bar(1, 10)
    assert err.getvalue() == ""                     # a short sweep draws nothing
    bar(50, 100)
    bar.close()
    assert "50/100 counts" in err.getvalue() and err.getvalue().endswith("\r")


# ------------------------------------------------------------------------------------------------
# Prices


PRICES_TOML = 'currency = "EUR"\nsource = "a test"\n[gpu_hour]\nH100 = 2.0\n"A100-80GB" = 1.0\n'


def test_prices_file_prices_every_option(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(PRICES_TOML)
    prices = load_prices(path)
    assert prices.gpu_hour == {"H100-SXM-80GB": 2.0, "A100-80GB": 1.0}
    priced = capacity(**{**SMALL, "gpu": ["H100", "A100-80GB"]}, prices=path, budget=80_000)
    assert priced.currency == "EUR" and priced.budget_unit == "EUR"
    for option in priced.options:
        assert option.cost == pytest.approx(option.gpu_hours * prices.gpu_hour[option.gpu])
    if priced.pick is not None:
        assert priced.pick.option.cost <= 80_000


def test_a_gpu_without_a_price_is_an_error():
    with pytest.raises(InputError) as err:
        capacity(**{**SMALL, "gpu": ["H100", "B200"]}, prices={"gpu_hour": {"H100": 2.0}})
    assert err.value.field == "prices.gpu_hour" and err.value.have == "B200"


@pytest.mark.parametrize("table", [{"H100": 0}, {"H100": -2}, {"H100": "2"}, {"H100": True}, {"H100": math.nan},
                                   {"H100": 1, "H100-SXM": 2}])
def test_bad_prices_name_the_gpu(table):
    with pytest.raises(InputError) as err:
        as_prices({"gpu_hour": table})
    assert err.value.field.startswith("Prices.gpu_hour.")


def test_a_malformed_prices_file_names_the_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("[gpu_hour\nH100 = 2")
    with pytest.raises(InputError) as err:
        load_prices(path)
    assert err.value.field == "prices" and "p.toml" in str(err.value.have)


# ------------------------------------------------------------------------------------------------
# Command line


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_lists_options_rejected_and_the_pick(capsys):
    code, out, _ = run(capsys, "capacity", "--model", "llama-3-8b", "--tokens", "1T", "--gpu", "H100",
                       "--gpus", "8..64", "--deadline", "30", "--json", "--workers", "1")
    doc = json.loads(out)
    assert code == 0 and {"options", "rejected", "pick"} <= set(doc)
    for key in ("gpu", "gpus", "layout", "step_time_s", "days", "gpu_hours", "cost", "mfu", "meets"):
        assert key in doc["options"][0]
    assert "recommendation" not in doc["options"][0]
    assert doc["pick"]["recommendation"]["trace"]["events"]


def test_cli_text_and_all_counts(capsys):
    argv = ["capacity", "--model", "llama-3-8b", "--tokens", "1T", "--gpus", "8..64", "--deadline", "30 days",
            "--workers", "1"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "Pick: the cheapest" in out and "What bounds scaling:" in out
    _, every, _ = run(capsys, *argv, "--all-counts")
    assert len(every.splitlines()) >= len(out.splitlines()) and "every option" in every


def test_cli_exit_1_when_nothing_meets_the_deadline(capsys):
    code, out, _ = run(capsys, "capacity", "--model", "llama-3-8b", "--tokens", "1T", "--gpus", "8",
                       "--deadline", "1", "--workers", "1")
    assert code == 1 and "No pick: no option meets the deadline" in out


@pytest.mark.parametrize("flag, value, field", [("--tokens", "lots", "tokens"), ("--deadline", "soon", "deadline"),
                                                ("--gpus", "9..1", "gpus"), ("--budget", "cheap", "budget"),
                                                ("--plot", "x.pdf", "--plot")])
def test_cli_bad_input_is_exit_2_naming_the_field(capsys, flag, value, field):
    argv = {"--tokens": "1T", "--gpus": "8", flag: value}
    code, out, err = run(capsys, "capacity", "--model", "llama-3-8b", *[x for kv in argv.items() for x in kv],
                         "--json")
    assert code == 2 and json.loads(out)["error"]["field"] == field, err


def test_plot_draws_svg_and_png_without_a_display(tmp_path, plan):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (pip install 'advisor[plot]')")
    from advisor.capacity_plan.plot import plot_plan

    for name in ("plan.svg", "plan.png"):
        path = plot_plan(plan, tmp_path / name)
        data = path.read_bytes()
        assert len(data) > 1000
        assert data.lstrip().startswith(b"<?xml") if name.endswith(".svg") else data[:4] == b"\x89PNG"
    unmet = capacity(**SMALL, deadline=1, budget=10)
    plot_plan(unmet, tmp_path / "unmet.svg")                # no pick: the lines, no star
    assert b"deadline 1.0 days" in (tmp_path / "unmet.svg").read_bytes()


CAPACITY_VOCABULARY = {
    "--tokens": ["1T", "300B", "0", "-1", "lots", "1e30"],
    "--gpu": ["H100", "A100-40GB", "GB200", "TPU", ""],
    "--gpus": ["8", "1..8", "12", "0", "9..1", "8,x", str(2**70)],
    "--deadline": ["30", "6 weeks", "0", "soon", "inf"],
    "--budget": ["50000", "-1", "nan", "cheap"],
    "--max-batch-tokens": ["16M", "1", "x"],
    "--restart-minutes": ["10", "-1", "nan"],
    "--checkpoint-bandwidth": ["200 MB/s", "80 GHz"],
    "--global-batch": ["64", "0"],
    "--precision": ["bf16", "fp8"],
    "--workers": ["1", "0", "65"],
}


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.sampled_from(sorted(CAPACITY_VOCABULARY)), max_size=3, unique=True), data=st.data())
def test_cli_fuzz_exits_0_1_or_2_with_json_always(picks, data):
    argv = ["capacity", "--model", "llama-3-8b", "--tokens", "1T", "--gpus", "8", "--workers", "1", "--json"]
    for flag in picks:
        argv += [flag, data.draw(st.sampled_from(CAPACITY_VOCABULARY[flag]))]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 1, 2), (argv, code, err.getvalue())
    assert "Traceback" not in err.getvalue() + out.getvalue()
    json.loads(out.getvalue())
