"""Issue 36: every input a user has, read one way on every command, and mistakes answered with the
nearest right thing (the --framework meaning, did-you-mean for names and keys, `want` as data)."""

import json

import pytest

from advisor.cli import main

H100x8 = ["--model", "llama-3-8b", "--gpu", "H100-SXM-80GB", "--gpus", "8"]


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- item 3: --framework is the stack on every command; the audited layout's is --layout-framework

@pytest.mark.parametrize("old", ["megatron", "megatron+deepspeed"])
def test_audit_framework_as_a_layout_framework_points_to_the_new_flag(capsys, old):
    code, _, err = run(capsys, "audit", *H100x8, "--framework", old, "--tp", "2")
    assert code == 2 and f"--layout-framework {old}" in err and "training stack" in err


def test_audit_layout_framework_from_the_flag_the_id_prefix_or_the_stated_stack(capsys):
    ids = set()
    for extra in (["--layout-framework", "deepspeed", "--zero", "3"], ["--framework", "deepspeed", "--zero", "3"],
                  ["--layout", "deepspeed/tp1-dp8-pp1-zero3"], ["--framework", "hf-trl", "--layout", "tp1-dp8-pp1-zero3"]):
        code, out, _ = run(capsys, "audit", *H100x8, "--json", *extra)
        assert code in (0, 1), extra     # the framework, not the verdict, is the point here
        ids.add(json.loads(out)["layout"]["framework"])
    assert ids == {"deepspeed"}


def test_audit_stated_stack_is_a_fact_the_rules_read(capsys):
    code, out, _ = run(capsys, "audit", *H100x8, "--json", "--framework", "nemo", "--tp", "2", "--sp", "--zero", "1")
    assert code == 0 and json.loads(out)["training"]["framework"] == "nemo"


def test_audit_layout_id_and_flags_together_are_refused_not_merged(capsys):
    code, out, _ = run(capsys, "audit", *H100x8, "--json", "--layout", "tp2-dp4-pp1-zero1-sp", "--tp", "4")
    error = json.loads(out)["error"]
    assert code == 2 and error["field"] == "--layout" and "--tp" in error["want"]
