"""The CLI ends every run with a documented status and never a traceback (issue 21, "safe to embed").

Exit status (advisor.cli.EXIT_STATUS): 0 ok, 1 no layout / audit error, 2 bad input or usage,
3 internal error, 4 output not writable, 130 SIGINT. With --json an error is also a JSON object on
stdout. Most cases run `advisor.cli.main(argv)` in this process (fast); the ones that need a real
process (stream encodings, /dev/full, a closed pipe, a signal) run `python -m advisor.cli`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor.api
from advisor.cli import EXIT_STATUS, main
from budget import examples  # tests/ is on sys.path (rootdir conftest)

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8"]
# Recommended on DeepSpeed with optimizer+params offload (the probe's --format megatron case).
OFFLOAD = ["--model", "llama-2-7b", "--gpu", "V100-16GB", "--gpus", "1"]

# A valid site rule, as short as the rule file schema allows; {message} is the only free part.
SITE_RULE = """\
[[rule]]
id = "site.note"
version = 1
tier = "checklist"
title = "a site note"
when = "cluster.gpus >= 1"
then = [{{ action = "checklist" }}]
message = "{message}"
rationale = "a test of the command line's error handling"
references = [{{ title = "site handbook", url = "https://example.org/handbook" }}]
[rule.examples]
fire = [{{ "cluster.gpus" = 8 }}]
no_fire = [{{ "cluster.gpus" = 0 }}]
"""


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def run_process(argv: list[str], env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor.cli", *argv], cwd=ROOT, capture_output=True,
                          timeout=120, env={**os.environ, **(env or {})}, **kw)


def error_object(out: str) -> dict:
    obj = json.loads(out)["error"]
    assert {"type", "exit_code", "message", "field", "have", "want", "hint"} <= obj.keys()
    return obj


def assert_clean(err: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err, err


# ------------------------------------------------------------------------------------------------
# Exit status 0, 1, 2 and the JSON error object


def test_exit_status_of_results():
    assert run(["recommend", *SMALL])[0] == 0
    assert run(["recommend", "--model", "llama-3.1-405b", "--gpu", "V100-16GB", "--gpus", "1"])[0] == 1
    assert run(["audit", *SMALL, "--tp", "3"])[0] == 1
    assert run(["audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--tp", "8", "--pp", "2",
                "--sp", "--zero", "1"])[0] == 0
    for listing in ("presets", "rules", "facts"):
        assert run([listing])[0] == 0


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "1e999", "[1e999]"])
def test_assume_refuses_non_finite_numbers(value):
    code, out, err = run(["recommend", *SMALL, "--assume", f"expert_gemm_overhead={value}", "--json"])
    assert code == 2 and err.startswith("advisor: error: --assume"), err
    obj = error_object(out)
    assert obj["type"] == "InputError" and obj["field"] == "--assume"
    assert obj["have"] == f"expert_gemm_overhead={value}" and "finite" in obj["want"]


def test_json_error_objects_name_field_have_and_want():
    code, out, _err = run(["recommend", "--model", "no-such-model", "--gpu", "H100", "--gpus", "8", "--json"])
    obj = error_object(out)
    assert code == 2 == obj["exit_code"]
    assert obj["type"] == "UnknownPresetError" and obj["have"] == "no-such-model" and "llama-3-8b" in obj["want"]

    code, out, _err = run(["recommend", *SMALL, "--seq-len", "-5", "--format", "json"])
    obj = error_object(out)
    assert code == 2 and obj["type"] == "ValidationError" and obj["errors"][0]["field"] == obj["field"]
    assert "seq_len" in obj["field"] and obj["have"] == "-5"

    code, out, err = run(["recommend", *SMALL[:-1], "eight", "--json"])         # argparse's own check
    obj = error_object(out)
    assert code == 2 and obj["type"] == "UsageError" and obj["field"] == "--gpus" and "usage:" in err


def test_rules_paths_that_are_not_rule_files(tmp_path):
    for path in (tmp_path / "missing.toml", tmp_path):
        code, out, err = run(["recommend", *SMALL, "--rules", str(path), "--json"])
        obj = error_object(out)
        assert code == 2 and obj["type"] == "RuleFileError" and obj["path"] == str(path), err
        assert_clean(err)


def test_a_rule_format_that_does_not_fit_its_fact_is_bad_input(tmp_path):
    # `:d` on a float fact: refused when the file loads (format specs are checked against the facts'
    # types), so it is the user's input, exit 2, with the file and rule named.
    site = tmp_path / "site.toml"
    site.write_text(SITE_RULE.format(message="{cluster.gpu_memory_gib:d}"), encoding="utf-8")
    code, out, err = run(["recommend", *SMALL, "--rules", str(site), "--json"])
    assert code == 2, err
    assert_clean(err)
    error = error_object(out)
    assert (error["type"], error["exit_code"]) == ("RuleFileError", 2) and error["path"] == str(site)


def test_rules_that_are_not_regular_files_are_refused_at_once(tmp_path):
    fifo = tmp_path / "policy.toml"
    os.mkfifo(fifo)                     # opening it for reading would block until a writer came
    for path in ("/dev/zero", str(fifo)):
        code, out, err = run(["recommend", *SMALL, "--rules", path, "--json"])
        assert code == 2, (path, err)
        assert error_object(out)["type"] == "RuleFileError"


def test_a_rule_file_nested_too_deep_is_bad_input(tmp_path):
    site = tmp_path / "deep.toml"
    site.write_text("x = " + "[" * 400 + "]" * 400 + "\n", encoding="utf-8")
    code, out, err = run(["recommend", *SMALL, "--rules", str(site), "--json"])
    assert code == 2, err
    assert_clean(err)
    assert error_object(out)["type"] == "RuleFileError"


# ------------------------------------------------------------------------------------------------
# Launch configs only in a format the recommended layout's framework runs


def test_format_the_framework_cannot_run_is_refused():
    code, out, err = run(["recommend", *OFFLOAD, "--format", "megatron"])
    assert code == 2 and not out
    assert "'deepspeed'" in err and "--format deepspeed" in err and "Layout.offload" not in err
    code, out, _err = run(["recommend", *OFFLOAD, "--format", "deepspeed"])
    assert code == 0 and json.loads(out)["zero_optimization"]["stage"] == 3


def test_help_documents_exit_status_and_formats():
    code, out, _err = run(["recommend", "--help"])
    assert code == 0 and "exit status:" in out and "megatron+deepspeed:" in out
    assert all(f"  {status} " in out for status in EXIT_STATUS)


# ------------------------------------------------------------------------------------------------
# Internal errors: one line, status 3; the traceback only when asked for


def _broken_recommend(*_args, **_kwargs):
    raise RuntimeError("planner bug\nsecond line")


def test_internal_error_is_one_line_and_exit_3(monkeypatch):
    monkeypatch.delenv("ADVISOR_DEBUG", raising=False)
    monkeypatch.setattr(advisor.api, "recommend", _broken_recommend)
    code, out, err = run(["recommend", *SMALL, "--json"])
    assert code == 3
    assert err == "advisor: internal error: RuntimeError: planner bug (please report)\n"
    assert error_object(out)["type"] == "RuntimeError"


@pytest.mark.parametrize("how", ["env", "flag"])
def test_debug_shows_the_traceback(monkeypatch, how):
    monkeypatch.setattr(advisor.api, "recommend", _broken_recommend)
    if how == "env":
        monkeypatch.setenv("ADVISOR_DEBUG", "1")
    code, _out, err = run(["recommend", *SMALL] + (["--debug"] if how == "flag" else []))
    assert code == 3 and "Traceback" in err and "_broken_recommend" in err


def test_base_exceptions_from_extensions_are_internal_errors(monkeypatch):
    class PanicException(BaseException):     # what pyo3 raises; it gets past `except Exception`
        pass

    def panic(*_args, **_kwargs):
        raise PanicException("capacity overflow")

    monkeypatch.setattr(advisor.api, "recommend", panic)
    code, _out, err = run(["recommend", *SMALL])
    assert code == 3 and "PanicException: capacity overflow" in err


# ------------------------------------------------------------------------------------------------
# Real processes: stream encodings, a full disk, a closed pipe, SIGINT


def test_ascii_stdout_gets_escapes_not_a_crash():
    proc = run_process(["recommend", *SMALL], env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert_clean(proc.stderr.decode())
    assert proc.stdout.isascii() and b"\\u2264" in proc.stdout        # the text holds "<=" as one character

    proc = run_process(["recommend", *SMALL, "--json"], env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0 and proc.stdout.isascii()
    assert "\u2264" in json.dumps(json.loads(proc.stdout), ensure_ascii=False)


def test_bad_input_in_a_real_process_has_no_traceback():
    proc = run_process(["recommend", *SMALL, "--assume", "expert_gemm_overhead=Infinity"], text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("advisor: error: --assume")
    assert_clean(proc.stderr)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_full_disk_is_one_line_and_exit_4():
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "advisor.cli", "recommend", *SMALL], cwd=ROOT,
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 4
    assert proc.stderr == "advisor: error: cannot write the output: [Errno 28] No space left on device\n"


@pytest.mark.parametrize("argv, status", [(["rules"], 0), (["recommend", *SMALL, "--json"], 0),
                                          (["audit", *SMALL, "--tp", "3"], 1)])
def test_closed_pipe_is_quiet_and_keeps_the_status(argv, status):
    read, write = os.pipe()
    os.close(read)                  # no reader at all: the first write gets EPIPE, deterministically
    try:
        proc = subprocess.run([sys.executable, "-m", "advisor.cli", *argv], cwd=ROOT, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == status and proc.stderr == ""


def test_closed_stdout_is_exit_4_and_closed_stderr_keeps_stdout_clean():
    # sh closes the descriptor; Python then starts with sys.stdout (or sys.stderr) = None.
    shell = ["sh", "-c", '"$0" -m advisor.cli "$@" >&-', sys.executable]
    proc = subprocess.run([*shell, "rules"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4
    assert proc.stderr == "advisor: error: cannot write the output: [Errno 9] stdout is closed\n"
    shell[2] = '"$0" -m advisor.cli "$@" 2>&-'
    proc = subprocess.run([*shell, "recommend", "--model", "no-such-model", "--gpu", "H100", "--gpus", "8"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""       # print(file=None) would have used stdout


# The child blocks inside the command (as a slow planner would), and says so on stderr, so the
# signal arrives mid-command on any machine, not after a guessed delay.
SLOW_CHILD = """
import sys, time
import advisor.api
def slow(*args, **kwargs):
    sys.stderr.write("ready\\n"); sys.stderr.flush()
    time.sleep(120)
advisor.api.recommend = slow
from advisor.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _interruptible() -> None:
    """In the child before Python starts: SIGINT as a terminal delivers it. A shell's background job (and
    a runner started from one) ignores SIGINT, and a Python started so keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_exits_130_without_a_traceback():
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CHILD, "recommend", *SMALL, "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)
    try:
        assert proc.stderr.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130 and err == "advisor: interrupted\n"
    assert error_object(out)["type"] == "KeyboardInterrupt"


# ------------------------------------------------------------------------------------------------
# argv fuzz: whatever the command line, a status in {0, 1, 2}, no traceback, JSON under --json

VOCABULARY = {
    "--model": ["llama-3-8b", "llama-2-7b", "mixtral-8x7b", "qwen2.5-7b", "gpt-5", ""],
    "--hf-config": ["/nonexistent/config.json", "/", "."],
    "--gpu": ["H100", "A100-40GB", "V100-16GB", "L40S", "TPU", ""],
    "--gpus": ["1", "8", "16", "64", "0", "-8", "3", "nan", "1e3", str(2**70)],
    "--gpus-per-node": ["8", "4", "3", "0"],
    "--nvlink-domain": ["8", "3", "0"],
    "--seq-len": ["4096", "8k", "128k", "-5", "8 GiB", "x"],
    "--global-batch": ["64", "512", "0", "-1"],
    "--micro-batch": ["1", "2", "0"],
    "--precision": ["bf16", "fp8", "fp32"],
    "--engine": ["python", "clips"],
    "--assume": ["megatron_main_grad_bytes=2", "tp_comm_overlap=true", "expert_gemm_overhead=Infinity",
                 "expert_gemm_overhead=NaN", "expert_gemm_overhead=-1", "nope=1", "=2", "noequals", "ep_overlap=[[[["],
    "--format": ["text", "json", "megatron", "deepspeed", "torchtitan", "yaml"],
    "--explain": ["summary", "full", "all"],
    "--rules": ["/nonexistent/site.toml", "/"],
    "--framework": ["megatron", "deepspeed", "megatron+deepspeed", "torchtitan", "fsdp"],
    "--tp": ["1", "2", "8", "0", "-2"], "--pp": ["1", "2", "3"], "--cp": ["1", "2"], "--ep": ["1", "8"],
    "--dp": ["1", "4", "7"], "--zero": ["0", "1", "3", "4"], "--num-microbatches": ["1", "8", "0"],
    "--recompute": ["none", "full"], "--offload": ["none", "optimizer", "optimizer+params"],
}
SWITCHES = ["--json", "--no-flash-attention"]
ONLY = {"recommend": ["--explain", "--micro-batch"], "explain": ["--micro-batch"],
        "audit": ["--framework", "--tp", "--pp", "--cp", "--ep", "--dp", "--zero", "--num-microbatches",
                  "--recompute", "--offload", "--micro-batch", "--sp", "--no-overlap-p2p"]}
COMMON = sorted(set(VOCABULARY) - {flag for flags in ONLY.values() for flag in flags} - {"--model", "--hf-config"})


@st.composite
def argv_strategy(draw):
    """Mostly flags the command takes, so that most runs get past argparse into advisor; one in
    eight is any flag of the vocabulary, valid for the command or not."""
    command = draw(st.sampled_from(["recommend", "recommend", "audit", "audit", "explain", "presets", "rules",
                                    "facts", "bogus"]))
    argv = [command]
    if command in ONLY:
        argv += ["--model", draw(st.sampled_from(VOCABULARY["--model"][:4])), "--gpu", "H100",
                 "--gpus", draw(st.sampled_from(["1", "8", "16"]))]
    usable = COMMON + SWITCHES + ONLY.get(command, []) if command in ONLY else ["--json"]
    for _ in range(draw(st.integers(0, 4))):
        anything = draw(st.integers(0, 7)) == 0
        flag = draw(st.sampled_from(sorted(VOCABULARY) + SWITCHES + ["--sp", "--bogus"] if anything else usable))
        argv += [flag, draw(st.sampled_from(VOCABULARY[flag]))] if flag in VOCABULARY else [flag]
    return argv


# In process; ADVISOR_CLI_FUZZ=4000 for a longer run (~25 s).
@settings(max_examples=int(os.environ.get("ADVISOR_CLI_FUZZ", examples(100, thorough=400))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(argv=argv_strategy())
def test_argv_fuzz(argv):
    code, out, err = run(argv)
    assert code in (0, 1, 2), (argv, code, err)
    assert_clean(err + out)
    if code == 2:
        assert err.strip(), argv
    formats = [value for flag, value in zip(argv, argv[1:]) if flag == "--format"]
    if "--json" in argv or formats[-1:] == ["json"]:         # a result or an error object, always JSON
        json.loads(out)


def test_user_guide_lists_every_exit_status():
    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    table = guide[guide.index('<a id="exit-codes"></a>'):]
    table = table[:table.index("\n\n", table.index("| code |"))]
    assert [int(line.split("|")[1]) for line in table.splitlines() if line[:3].strip("| ").isdigit()] \
        == sorted(EXIT_STATUS)


# ---- issue 36 item 2: --global-batch 4M is tokens, 512 is sequences

def test_global_batch_with_a_suffix_is_tokens_and_is_echoed(capsys):
    from advisor.cli import main

    base = ["recommend", "--model", "llama-3-8b", "--gpu", "H100-SXM-80GB", "--gpus", "8", "--json"]
    assert main(base + ["--global-batch", "4M", "--seq-len", "4k"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["training"]["global_batch_size"] == 1024
    assert "4M = 4,194,304 tokens = 1024 sequences of 4096" in captured.err
    assert main(base + ["--global-batch", "512"]) == 0
    assert json.loads(capsys.readouterr().out)["training"]["global_batch_size"] == 512


def test_global_batch_refuses_other_text_naming_both_readings(capsys):
    from advisor.cli import main

    code = main(["recommend", "--model", "llama-3-8b", "--gpu", "H100-SXM-80GB", "--gpus", "8",
                 "--global-batch", "4X", "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and error["field"] == "--global-batch" and "tokens with a suffix" in error["want"]
