"""CLI conventions (issue 20 item 5): --version, `python -m advisor`, --json on every subcommand
(errors included), and launch-config formats that put only the config on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

import advisor
from advisor.build_info import describe
from advisor.cli import main

SMALL = ["--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_says_the_release_and_the_build(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"advisor {advisor.__version__} ({describe()})"


def test_python_dash_m():
    done = subprocess.run([sys.executable, "-m", "advisor", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"advisor {advisor.__version__} ({describe()})"


@pytest.mark.parametrize("command", ["rules", "facts", "presets"])
def test_listings_have_json(capsys, command):
    code, out, _ = run(capsys, command, "--json")
    assert code == 0 and isinstance(json.loads(out), dict)


@pytest.mark.parametrize("command", ["recommend", "audit", "explain"])
def test_errors_are_json_objects_on_stdout_with_json(capsys, command):
    code, out, err = run(capsys, command, "--model", "no-such-model", "--gpu", "H100", "--gpus", "8", "--json")
    assert code == 2 and "no-such-model" in err
    error = json.loads(out)["error"]
    assert (error["field"], error["have"], error["exit_code"]) == ("Model.preset", "no-such-model", 2)


def test_deepspeed_format_writes_only_json(capsys):
    code, out, err = run(capsys, "recommend", *SMALL, "--seq-len", "32k", "--format", "deepspeed")
    assert code == 0
    cfg = json.loads(out)                                   # the whole of stdout is the config
    assert cfg["sequence_parallel_size"] == 4 and "note:" in err


def test_nothing_to_export_leaves_stdout_empty(capsys):
    # the audit finds an error (70B with ZeRO-0 does not fit): the report goes to stderr
    code, out, err = run(capsys, "audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--seq-len", "8k",
                         "--global-batch", "512", "--tp", "8", "--pp", "2", "--sp", "--zero", "0",
                         "--format", "deepspeed")
    assert code == 1 and out == "" and "error" in err


def test_framework_version_selects_torchtitan_form(capsys):
    audit = ["audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--seq-len", "8k",
             "--global-batch", "512", "--layout-framework", "torchtitan", "--tp", "8", "--zero", "3", "--sp"]
    code, out, _ = run(capsys, *audit, "--format", "torchtitan")
    assert code == 0 and out.startswith("torchrun ") and "--parallelism.tensor_parallel_degree 8" in out
    code, out, _ = run(capsys, *audit, "--format", "torchtitan", "--framework-version", "v0.2.2")
    assert code == 0 and tomllib.loads(out)["parallelism"]["tensor_parallel_degree"] == 8
    code, out, err = run(capsys, *audit, "--format", "torchtitan", "--framework-version", "v9")
    assert code == 2 and out == "" and "--framework-version" in err and "v0.2.2" in err


def test_megatron_format_takes_the_release(capsys):
    code, out, _ = run(capsys, "audit", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--zero", "3",
                       "--recompute", "full", "--format", "megatron", "--framework-version", "core_v0.16.1")
    assert code == 0 and "--rotary-base 500000" in out
