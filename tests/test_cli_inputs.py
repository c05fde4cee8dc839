"""Issue 36: every input a user has, read one way on every command, and mistakes answered with the
nearest right thing (the --framework meaning, did-you-mean for names and keys, `want` as data)."""

import json
import re

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


# ---- item 4: did-you-mean, ranked by similarity; a few names, not all of them; hub ids

def test_assume_typo_suggests_the_knob(capsys):
    code, out, _ = run(capsys, "recommend", *H100x8, "--json", "--assume", "megatron_main_grad_byte=2")
    error = json.loads(out)["error"]
    assert code == 2 and error["hint"].startswith("did you mean megatron_main_grad_bytes")


@pytest.mark.parametrize("cls, key, first", [("Training", "global_batch", "global_batch_size"),
                                             ("Cluster", "num_gpus", "gpus"),
                                             ("Training", "seq_length", "seq_len"),
                                             ("GPU", "memroy", "memory")])
def test_mistyped_keys_name_the_field_meant(cls, key, first):
    import advisor
    from advisor import InputError

    base = {"Training": {}, "Cluster": {"gpu": "H100"}, "GPU": {"memory": "80 GiB", "peak_flops": "989 TF"}}[cls]
    data = {**{k: v for k, v in base.items() if not (cls == "GPU" and k == "memory")}, key: 8}
    with pytest.raises(InputError) as info:
        from advisor.inputs.coerce import coerce

        coerce(data, getattr(advisor, cls), cls.lower(), "fields")
    err = info.value
    assert f"did you mean {first}" in err.hint and isinstance(err.want, list) and first in err.want


def test_a_gpu_spec_file_with_a_mistyped_key_suggests_the_field(tmp_path, capsys):
    spec = tmp_path / "gpu.json"
    spec.write_text(json.dumps({"memory": "48 GiB", "peak_flops": "181 TFLOP/s", "nvlink_bandwith": "600 GB/s"}))
    code, out, _ = run(capsys, "recommend", "--model", "llama-3-8b", "--gpu-spec", str(spec), "--gpus", "8", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and "did you mean nvlink_bandwidth" in error["hint"]


def test_gpu_suggestions_rank_the_same_family_first(capsys):
    code, _, err = run(capsys, "recommend", "--model", "llama-3-8b", "--gpu", "H100-80GB", "--gpus", "8")
    assert code == 2 and "did you mean H100-SXM-80GB," in err


def test_a_mistyped_model_prints_a_few_names_not_all(capsys):
    code, _, err = run(capsys, "recommend", "--model", "llama-3-8", "--gpu", "H100", "--gpus", "8")
    assert code == 2 and "did you mean llama-3-8b" in err
    assert "deepseek-v3.2" not in err and max(len(line) for line in err.splitlines()) < 400


def test_a_hub_id_gets_the_hf_config_hint(capsys):
    code, _, err = run(capsys, "recommend", "--model", "meta-llama/Meta-Llama-3-8B", "--gpu", "H100", "--gpus", "8")
    assert code == 2 and "Hugging Face hub id" in err and "--hf-config" in err and "did you mean llama-3-8b" in err


# ---- item 5: JSON errors carry `want` as data

@pytest.mark.parametrize("argv", [
    ["recommend", "--model", "llama-3-8", "--gpu", "H100", "--gpus", "8"],
    ["recommend", "--model", "llama-3-8b", "--gpu", "H100-80GB", "--gpus", "8"],
    ["recommend", *H100x8[:4], "--gpus", "0"],
    ["recommend", *H100x8, "--micro-batch", "0"],
    ["recommend", *H100x8, "--assume", "hbm_efficiency=2"],
    ["recommend", *H100x8, "--assume", "megatron_main_grad_byte=2"],
])
def test_json_error_want_is_data_never_a_python_list_or_pydantic_text(capsys, argv):
    code, out, _ = run(capsys, *argv, "--json")
    error = json.loads(out)["error"]
    assert code == 2
    for item in [error, *error.get("errors", [])]:
        want = item["want"]
        assert want is not None
        if isinstance(want, str):
            assert not want.lstrip("one of ").startswith("[") and "Input should" not in want, want
            assert "permitted" not in want, want


# ---- item 7: "No layout fits" says what would, each change planned again

def test_no_layout_fits_names_changes_that_fit_each_planned_again(capsys):
    import advisor

    code, out, _ = run(capsys, "recommend", "--model", "llama-3-70b", "--gpu", "L4", "--gpus", "1", "--seq-len", "128k",
                       "--width", "200")
    assert code == 1 and "No layout fits" in out and "What would fit" in out
    more = re.search(r"- (\d+) GPUs: (\S+) \(([\d.]+) of ([\d.]+) GiB per GPU\)", out)
    shorter = re.search(r"- seq (\d+): (\S+) ", out)
    assert more and shorter
    rec = advisor.recommend({"gpu": "L4", "gpus": int(more.group(1))}, "llama-3-70b", {"seq_len": "128k"})
    assert rec.status == "recommended" and rec.layout.id == more.group(2)
    assert f"{rec.memory.total / 2**30:.1f}" == more.group(3)
    half = advisor.recommend({"gpu": "L4", "gpus": int(more.group(1)) // 2}, "llama-3-70b", {"seq_len": "128k"})
    assert half.status != "recommended"                       # the smallest count: half of it does not fit
    assert advisor.recommend({"gpu": "L4", "gpus": 1}, "llama-3-70b",
                             {"seq_len": int(shorter.group(1))}).layout.id == shorter.group(2)


def test_a_batch_the_gpu_count_cannot_split_is_answered_with_one_it_can(capsys):
    """LoRA's 128 sequences on 256 GPUs under a stack with data parallelism only (hf-trl): no layout; a
    batch of 256 splits, planned again."""
    import advisor

    code, out, _ = run(capsys, "recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "256", "--task", "lora",
                       "--framework", "hf-trl", "--width", "200")
    assert code == 1
    split = re.search(r"- global batch 256: (\S+) ", out)
    assert split and advisor.recommend({"gpu": "H100", "gpus": 256}, "llama-3-8b", {
        "task": "lora", "framework": "hf-trl", "global_batch_size": 256}).layout.id == split.group(1)


def test_a_precision_the_gpu_cannot_run_is_answered_with_its_own(capsys):
    import advisor

    code, out, _ = run(capsys, "recommend", "--model", "llama-3-8b", "--gpu", "A100", "--gpus", "8", "--precision", "fp8",
                       "--width", "200")
    assert code == 1 and "No legal layout" in out
    own = re.search(r"- precision bf16: (\S+) ", out)
    assert own and advisor.recommend({"gpu": "A100", "gpus": 8}, "llama-3-8b").layout.id == own.group(1)


# ---- item 6: Volta has no BF16 and no FlashAttention; the rules say so, the planner does not pick bf16

def test_audit_refuses_bf16_and_warns_on_flash_attention_on_volta():
    import advisor

    layout = advisor.Layout(tp=1, pp=1, dp=8, zero_stage=1)
    report = advisor.audit({"gpu": "V100", "gpus": 8}, "llama-2-7b", layout,
                           {"seq_len": 2048, "precision": "bf16", "flash_attention": True})
    assert "layout.bf16-needs-bf16-tensor-cores" in {f.rule_id for f in report.errors}
    assert "layout.flash-attention-needs-sm80" in {f.rule_id for f in report.warnings}
    fp16 = advisor.audit({"gpu": "V100", "gpus": 8}, "llama-2-7b", layout,
                         {"seq_len": 2048, "precision": "fp16", "flash_attention": False})
    assert not {"layout.bf16-needs-bf16-tensor-cores", "layout.flash-attention-needs-sm80"} & {f.rule_id for f in fp16.findings}
    h100 = advisor.audit({"gpu": "H100", "gpus": 8}, "llama-2-7b", layout, {"seq_len": 2048})
    assert not {"layout.bf16-needs-bf16-tensor-cores", "layout.flash-attention-needs-sm80"} & {f.rule_id for f in h100.findings}


def test_the_planner_never_recommends_bf16_on_volta(capsys):
    import advisor

    rec = advisor.recommend({"gpu": "V100", "gpus": 8}, "llama-2-7b", {"precision": "bf16"})
    assert rec.status != "recommended" and "bf16-needs-bf16-tensor-cores" in " ".join(e.message + (e.rule_id or "")
                                                                                    for e in rec.trace.events)
    code, out, err = run(capsys, "recommend", "--model", "llama-2-7b", "--gpu", "V100", "--gpus", "8", "--json")
    assert code == 0 and json.loads(out)["training"]["precision"] == "fp16" and "no BF16 tensor cores" in err


def test_what_the_gpu_decides_when_unstated_is_the_same_on_the_api_and_the_cli(capsys):
    """An unstated precision and FlashAttention follow the GPU (inputs.specs.part_defaults): fp16 and the
    unfused attention on a V100, with a note in the trace and on stderr; a recommendation then carries
    neither the bf16 error nor the FlashAttention warning of its own defaults. What is stated stays."""
    import advisor

    rec = advisor.recommend({"gpu": "V100-32GB", "gpus": 16}, "llama-2-7b")
    assert rec.status == "recommended"
    assert (rec.training.precision, rec.training.flash_attention) == ("fp16", False)
    assert not {"layout.bf16-needs-bf16-tensor-cores", "layout.flash-attention-needs-sm80"} & \
        {f.rule_id for f in rec.findings}
    inputs = [e.message for e in rec.trace.events if e.op == "input"]
    assert any("training.precision not given: fp16" in m for m in inputs)
    assert any("training.flash_attention not given: off" in m for m in inputs)
    stated = advisor.recommend({"gpu": "V100-32GB", "gpus": 16}, "llama-2-7b", {"flash_attention": True})
    assert stated.training.flash_attention is True
    assert "layout.flash-attention-needs-sm80" in {f.rule_id for f in stated.findings}
    h100 = advisor.recommend({"gpu": "H100", "gpus": 16}, "llama-2-7b")
    assert (h100.training.precision, h100.training.flash_attention) == ("bf16", True)
    assert not any("not given: fp16" in e.message or "flash_attention not given" in e.message
                   for e in h100.trace.events)
    code, out, err = run(capsys, "recommend", "--model", "llama-2-7b", "--gpu", "V100-32GB", "--gpus", "16", "--json")
    assert code == 0 and json.loads(out)["layout"]["id"] == rec.layout.id
    assert "training.flash_attention not given: off" in err
    code, out, err = run(capsys, "recommend", "--model", "llama-2-7b", "--gpu", "V100-32GB", "--gpus", "16",
                         "--precision", "fp16", "--no-flash-attention", "--json")
    assert code == 0 and "not given" not in err and json.loads(out)["layout"]["id"] == rec.layout.id


def test_capacity_on_volta_runs_fp16_without_being_told():
    import advisor

    plan = advisor.capacity("llama-3-8b", tokens="1B", gpu=["V100-32GB", "H100"], gpus=[16], workers=1)
    runs = {o.gpu: o.recommendation.training.precision for o in plan.options}
    assert runs == {"V100-32GB": "fp16", "H100-SXM-80GB": "bf16"} and plan.precision == "bf16 (V100-32GB fp16)"


def test_gpu_flags_are_dumped_only_where_false_and_read_back():
    import advisor

    v100, h100 = advisor.Cluster(gpu="V100", gpus=8).gpu, advisor.Cluster(gpu="H100", gpus=8).gpu
    assert (v100.bf16, v100.flash_attention, h100.bf16, h100.flash_attention) == (False, False, True, True)
    assert "bf16" not in h100.model_dump() and v100.model_dump()["bf16"] is False
    assert advisor.GPU(**v100.model_dump()) == v100 and advisor.GPU(**h100.model_dump()) == h100


# ---- item 9: the README's install path without a C compiler stays true to pyproject

def test_readme_no_compiler_install_lists_every_other_dependency():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    deps = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    line = next(line for line in readme.splitlines() if line.startswith("pip install --no-deps ."))
    for dep in deps:
        if not dep.startswith("durable-rules"):
            assert f"'{dep}'" in line, dep
    assert "answers identically" in readme and "about 75 s of CPU" in readme


def test_no_layout_fits_in_json_carries_the_changes_each_planned_again(capsys):
    import advisor

    code, out, _ = run(capsys, "recommend", "--model", "llama-3-70b", "--gpu", "L4", "--gpus", "1", "--seq-len", "128k",
                       "--json")
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "infeasible"
    changes = {c["what"]: c for c in doc["what_would_fit"]}
    gpus = next(c for what, c in changes.items() if what.endswith(" GPUs"))
    rec = advisor.recommend({"gpu": "L4", "gpus": int(gpus["what"].split()[0])}, "llama-3-70b", {"seq_len": "128k"})
    assert rec.layout.id == gpus["layout_id"] and gpus["memory_gib"] == rec.memory.total / 2**30
    # a recommendation that fits says nothing of the kind
    code, out, _ = run(capsys, "recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--json")
    assert code == 0 and "what_would_fit" not in json.loads(out)


@pytest.mark.parametrize("where", ["missing/folder/profile.json", "."])
def test_measure_refuses_an_output_it_cannot_write_before_measuring(where, tmp_path, capsys, monkeypatch):
    """An --out in a folder that does not exist (or a folder itself) is an input error at once, not an
    internal error after minutes of measuring (exit 2, naming the option)."""
    monkeypatch.chdir(tmp_path)
    assert main(["measure", "--smoke", "--gpu", "H100", "--out", where]) == 2
    err = capsys.readouterr().err
    assert "measure --out" in err and "internal error" not in err


def test_audit_takes_the_layout_id_on_its_own_as_compare_does(capsys):
    base = ["audit", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--json", "--no-compare"]
    code, positional, _ = run(capsys, *base, "tp4-dp4-pp4-zero1-sp")
    code2, flagged, _ = run(capsys, *base, "--layout", "tp4-dp4-pp4-zero1-sp")
    assert code == code2 and json.loads(positional) == json.loads(flagged)
    code, _, err = run(capsys, *base, "--layout", "tp8-dp8-pp1-zero1-sp", "tp4-dp4-pp4-zero1-sp")
    assert code == 2 and "--layout" in err and "one layout" in err
