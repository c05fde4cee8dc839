"""The first screen answers (issue 36): `advisor recommend` prints the answer first, on one screen,
wrapped to the terminal's width, each fact once; -q prints the layout id alone; the longer account
is behind --explain; every answer states the network it assumed."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

import advisor
from advisor.cli import main
from advisor.inputs.layout import Layout
from advisor.results.brief import wrap_lines
from advisor.results.render import estimate_lines

ROOT = Path(__file__).resolve().parent.parent
FIRST = ["recommend", "--model", "llama-3-70b", "--gpu", "H100-SXM-80GB", "--gpus", "64"]   # README's first command
SCREEN = 50


def run(argv: list[str], columns: int = 80, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", str(columns))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    return code, out.getvalue(), err.getvalue()


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.fixture(scope="module")
def first():
    code, out, _ = run(FIRST)
    assert code == 0
    return out


def test_the_answer_comes_first_on_one_screen(first):
    lines = first.splitlines()
    assert len(lines) <= SCREEN and widest(first) <= 80
    answer = next(i for i, line in enumerate(lines) if line.startswith("Recommendation: "))
    assert answer <= 5 and "tp8-dp4-pp2-vpp2-zero1-sp-nmb128" in lines[answer]
    for heading in ("Memory per GPU: ", "Step: ", "Throughput: ", "Also fit, ranked lower:", "Checklist:"):
        assert sum(line.startswith(heading) for line in lines) == 1, heading
    assert "reject:" not in first and "Trace:" not in first             # behind --explain full


def test_each_fact_is_said_once(first):
    rec = advisor.recommend({"gpu": "H100-SXM-80GB", "gpus": 64}, "llama-3-70b")
    flat = " ".join(first.split())
    assert flat.count(rec.layout.id) == 1
    for item in rec.checklist:
        assert flat.count(" ".join(item.text.split())) == 1
    chose = next(e for e in rec.trace.events if e.op == "fire" and e.rule_id == "matrix.large-model-tp-pp")
    assert flat.count(" ".join(chose.message.split())) == 1
    assert flat.count(f"{rec.estimates.step_time:.2f} s (") == 1
    assert sum(a.layout.id in flat for a in rec.alternatives) == 3 and "(2 more: --explain)" in flat


def test_figures_are_named_as_framework_logs_print_them(first):
    flat = " ".join(first.split())
    assert re.search(r"[\d,]+ tokens/s and [\d,]+ TFLOP/s per GPU; MFU \d+\.\d% of the 989 TFLOP/s BF16 dense peak",
                     flat)
    code, out, _ = run([*FIRST, "--precision", "fp8"])
    assert code == 0 and re.search(r"% of the 1,979 TFLOP/s FP8 peak", " ".join(out.split()))


def fits(text: str, columns: int) -> bool:
    """Every line within `columns`, but for a line that is one word (a layout id) after its indent."""
    return all(len(line) <= columns or len(line.split()) == 1 or len(line.split()) == 2 and line.split()[0] == "-"
               for line in text.splitlines())


@pytest.mark.parametrize("columns", [44, 60, 100, 140])
def test_the_text_adapts_to_the_terminal_width(columns):
    code, out, _ = run(FIRST, columns=columns)
    assert code == 0 and fits(out, columns)
    if columns > 80:
        assert widest(out) > 80                                         # the room is used
    code, out, _ = run([*FIRST, "--width", str(columns), "--explain", "full"], columns=200)
    assert code == 0 and fits(out, columns)


def test_a_width_below_the_minimum_is_refused():
    code, _out, err = run([*FIRST, "--width", "12"])
    assert code == 2 and "--width" in err and "at least 40" in err


def test_quiet_prints_the_layout_id_alone():
    code, out, err = run([*FIRST, "-q"])
    assert code == 0 and err == "" and out.count("\n") == 1
    assert Layout.parse(out.strip()).id == out.strip() == "tp8-dp4-pp2-vpp2-zero1-sp-nmb128"
    code, out, err = run(["recommend", "--model", "llama-3.1-405b", "--gpus", "8", "--gpu-spec",
                          str(ROOT / "tests" / "data" / "tiny-gpu.json"), "--framework", "megatron-lm", "-q"])
    assert code == 1 and out == "" and err.startswith("advisor: no layout fits: closest ")


def test_explain_levels():
    _, summary, _ = run([*FIRST, "--explain"])
    _, full, _ = run([*FIRST, "--explain", "full"])
    assert "Why (rules that fired, in order):" in summary and "Trace:" not in summary
    assert "rejected (--explain full lists them)" in summary and "  - reject: " not in summary
    assert "Trace:" in full and "  - reject: " in full and "Did not fire" in full


def test_every_answer_states_the_network():
    for argv in (FIRST, [*FIRST, "--explain"], ["audit", *FIRST[1:], "--tp", "8", "--pp", "2"]):
        _, out, _ = run([*argv, "--inter-node-bandwidth", "25Gbit/s"])
        flat = " ".join(out.split())
        assert "network 25 Gbit/s per GPU" in flat and "NVLink domain 8 (900 GB/s per GPU)" in flat


def _readme_commands() -> list[list[str]]:
    """The README's `advisor recommend` / `audit` lines that print text and need no file of the reader's."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for line in re.findall(r"^advisor (?:recommend|audit) [^#\n]*", text, flags=re.M):
        argv = shlex.split(line)[1:]
        if not {"--json", "--format", "--hf-config", "--profile", "--gpu-spec"} & set(argv):
            out.append(argv)
    return out


def test_the_readme_commands_fit_100_columns():
    commands = _readme_commands()
    assert len(commands) >= 4
    for argv in commands:
        code, out, err = run(argv, columns=100)
        assert code in (0, 1), (argv, err)
        assert widest(out) <= 100, argv


def test_wrapping_keeps_ids_whole_and_markers_hanging():
    long_id = "deepspeed/tp1-cp8-dp1-pp1-zero3-mbs2-nmb256-rc:full-offload:optimizer+params@nvme"
    lines = wrap_lines([f"  - {long_id} (20.5 GiB per GPU): about as fast " + "word " * 20,
                        "WARNING rule.id: " + "text " * 30], 60)
    assert lines[0] == f"  - {long_id}" and all(line.startswith("    ") for line in lines[1:4])
    warning = lines.index(next(line for line in lines if line.startswith("WARNING")))
    assert lines[warning + 1].startswith(" " * 8) and not lines[warning + 1].startswith(" " * 9)


def test_memory_bars_stay_within_their_column():
    est = advisor.estimate({"gpu": "H100", "gpus": 8}, "llama-3-70b", {"tp": 1, "dp": 8},
                           {"seq_len": 4096, "global_batch_size": 64})
    bars = [line.split("GiB", 1)[1].strip() for line in estimate_lines(est)[1:7]]
    assert max(map(len, bars)) <= 40 and any(bar.endswith(">") for bar in bars)


def test_when_nothing_fits_the_first_screen_says_what_came_closest():
    code, out, _ = run(["recommend", "--model", "llama-3.1-405b", "--gpus", "8", "--gpu-spec",
                        str(ROOT / "tests" / "data" / "tiny-gpu.json"), "--framework", "megatron-lm"])
    flat = " ".join(out.split())
    assert code == 1 and "No layout fits: closest tp1-dp1-pp8-zero1-nmb512-rc:full needs" in flat
    assert "[stack.megatron-core-runs-megatron]" in flat and "every rejected layout" in flat
    assert "Recommendation:" not in flat and "Checklist:" not in flat


def test_the_why_line_names_the_near_tie_preference_the_pick_follows():
    """Mixtral on 64 H100: the strategy rule says "TP inside the node first", the MoE rule's "less TP"
    stands over it among near-ties, and the pick has TP 1: the why line names both, so it does not
    contradict the layout above it."""
    import advisor
    from advisor.results.brief import deciding_rule

    rec = advisor.recommend({"gpu": "H100", "gpus": 64}, "mixtral-8x7b")
    why = deciding_rule(rec)
    assert rec.layout.tp == 1
    assert why.index("[matrix.large-model-tp-pp]") < why.index("near-ties:") < why.index("[matrix.moe-expert-parallel]")
    dense = advisor.recommend({"gpu": "H100", "gpus": 64}, "llama-3-70b")
    assert "near-ties:" not in deciding_rule(dense)


def test_the_why_line_says_what_keeps_the_pick_from_the_rules_words():
    """A PCIe GPU (NVLink domain 1): the strategy rule says "TP inside the node first" and the NVLink rule
    keeps TP at 1, both named. A LoRA batch of 128 on 256 GPUs: the rule says "pure data parallelism",
    no ZeRO layout can split that batch over 256 ranks, and the line says so above a TP 2 pick."""
    import advisor
    from advisor.results.brief import deciding_rule

    pcie = advisor.recommend({"gpu": "L40S", "gpus": 64}, "gemma-3-27b")
    assert pcie.layout.tp == 1 and "[constraint.tp-within-nvlink-domain]" in deciding_rule(pcie)
    lora = advisor.recommend({"gpu": "H100", "gpus": 256}, "llama-3-8b", {"task": "lora"})
    why = deciding_rule(lora)
    assert lora.layout.tp > 1 and "pure data parallelism" in why and why.endswith("so model parallelism")
    assert "global batch 128" in why


def test_an_answer_every_rule_refused_is_not_called_out_of_memory():
    """FP8 on an A100: layouts fit in memory, the audit refuses them all (no FP8 tensor cores), so the
    answer reads "No legal layout", and "No layout fits" stays for memory."""
    import advisor
    from advisor.results.brief import brief_text

    fp8 = brief_text(advisor.recommend({"gpu": "A100", "gpus": 8}, "llama-3-8b", {"precision": "fp8"}))
    assert "No legal layout: " in fp8 and "layout.fp8-needs-fp8-tensor-cores" in fp8
    oom = brief_text(advisor.recommend({"gpu": "L4", "gpus": 1}, "llama-3-70b", {"seq_len": "128k"}))
    assert "No layout fits: closest" in oom


@pytest.mark.parametrize("seconds, shown", [(3599.0, ""), (7200.0, " = 2.0 hours"), (304513.14, " = 3.5 days")])
def test_a_step_of_an_hour_or_more_is_also_given_in_hours_or_days(seconds, shown):
    from advisor.results.brief import _long
    assert _long(seconds) == shown


def test_one_gpu_is_one_gpu_in_the_why_line():
    code, out, _ = run(["recommend", "--model", "llama-3.1-405b", "--gpu", "H100-SXM-80GB", "--gpus", "1"])
    assert code == 0
    flat = " ".join(out.split())
    assert "why: 1 GPU (≤ 32)" in flat and "1 GPUs" not in flat
    assert re.search(r"Step: [0-9.]+ s = [0-9.]+ days", flat)
