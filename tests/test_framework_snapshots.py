"""The exports against the frameworks' own vocabularies at the pinned releases, without installing
them: tests/data/frameworks/*.json are the option lists of Megatron-LM's real parser, the field names
of torchtitan's config dataclasses and DeepSpeed's config keys, written by
`benchmarks/validate_exports.py --snapshot` (a list of names is data, not code). The project's own key
tables (MEGATRON_FLAGS, TORCHTITAN_KEYS) are checked against them too, so drift in a framework shows
here first; refresh the snapshots with that script when a pin moves."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import advisor
from advisor import Assumptions, Cluster, Layout
from advisor import export as ex

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "data" / "frameworks"
SCENARIOS = tomllib.loads((ROOT / "benchmarks" / "validate_exports.toml").read_text())


def _snapshot(name: str) -> dict:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def _exported() -> list[tuple]:
    """(layout, model, training, cluster, assumptions) of every exportable scenario of the validation run,
    plus its torchtitan twin: the same exports benchmarks/validate_exports.py feeds to the frameworks."""
    out = []
    for sc in SCENARIOS["scenario"]:
        cluster = Cluster(gpu=sc["gpu"], gpus=sc["gpus"])
        training = {k: v for k, v in (("seq_len", sc.get("seq_len")), ("global_batch_size", sc.get("global_batch")))
                    if v is not None}
        if "layout" in sc:
            res = advisor.audit(cluster, sc["model"], Layout(**sc["layout"]), training, assumptions=sc.get("assume"))
            layout = res.layout if res.ok else None
        else:
            res = advisor.recommend(cluster, sc["model"], training, assumptions=sc.get("assume"))
            layout = res.layout
        if layout is None:
            continue
        A = res.estimates.assumptions if res.estimates is not None else Assumptions(**sc.get("assume", {}))
        out.append((layout, res.model, res.training, res.cluster, A))
        if layout.framework != "torchtitan":
            twin = advisor.audit(cluster, res.model, layout.model_copy(update={
                "framework": "torchtitan", "etp": 1 if layout.ep > 1 else None}), res.training)
            if twin.ok:
                out.append((twin.layout, res.model, res.training, res.cluster, A))
    return out


EXPORTED = _exported()


def test_pins_agree_everywhere():
    releases = {r["name"]: r for r in SCENARIOS["release"]}
    for version, commit in ex.MEGATRON_PINS.items():
        assert releases[f"megatron-{version}"]["commit"] == commit == _snapshot(f"megatron-{version}")["commit"]
    for version, commit in ex.TORCHTITAN_PINS.items():
        assert releases[f"torchtitan-{version}"]["commit"] == commit == _snapshot(f"torchtitan-{version}")["commit"]
    assert _snapshot("deepspeed")["commit"] == SCENARIOS["deepspeed"]["requirement"]


@pytest.mark.parametrize("version", list(ex.MEGATRON_PINS))
def test_megatron_flag_table_against_the_real_parser(version):
    real = _snapshot(f"megatron-{version}")["flags"]
    for flag, spec in ex.MEGATRON_FLAGS.items():
        if version not in spec.versions or not spec.emitted:
            continue
        assert flag in real, f"{flag} is not an option of Megatron-LM {version}"
        if spec.kind == "choice":
            choices = set(spec.choices) | (set(spec.main_choices) if version == "main" else set())
            assert choices <= set(real[flag].get("choices", spec.choices)), (flag, real[flag])
            assert not set(spec.main_choices) & set(real[flag].get("choices", ())) or version == "main", flag
        if spec.kind in ("store_true", "store_false"):
            assert real[flag]["action"] == spec.kind.replace("_", ""), (flag, real[flag])
        if spec.kind in ("int", "float"):
            assert real[flag].get("type", spec.kind) == spec.kind, (flag, real[flag])


def _main_only(model) -> bool:
    pattern = model.hybrid_pattern or ""
    return ("G" in pattern or (model.rope_scaling == "yarn" and model.mla is None) or model.dsa_topk is not None
            or bool(pattern and model.mtp_layers))


@pytest.mark.parametrize("version", list(ex.MEGATRON_PINS))
def test_every_megatron_export_uses_real_flags_and_choices(version):
    real = _snapshot(f"megatron-{version}")["flags"]
    n = 0
    for layout, model, training, cluster, A in EXPORTED:
        if layout.framework != "megatron":      # megatron+deepspeed: its own parser (tests below)
            continue
        if version != "main" and _main_only(model):
            # what only main builds (a Gated DeltaNet hybrid, YaRN on a GPT model, DSA's sparse path, a hybrid
            # stack's MTP modules): the export says so for the release
            with pytest.raises(advisor.InputError, match="Megatron-LM core_v0.16.1"):
                ex.megatron_args(layout, model, training, cluster, A, version=version)
            continue
        args = ex.megatron_args(layout, model, training, cluster, A, version=version)
        for i, token in enumerate(args):
            if token.startswith("--"):
                n += 1
                assert token in real, f"{token} ({layout.id}) is not an option of Megatron-LM {version}"
                choices = real[token].get("choices")
                if choices and i + 1 < len(args):
                    assert args[i + 1] in choices, (token, args[i + 1], choices)
    assert n > 100


def test_torchtitan_exports_use_real_keys():
    main = set(_snapshot("torchtitan-main")["keys"])
    v022 = set(_snapshot("torchtitan-v0.2.2")["keys"])
    assert set(ex.TORCHTITAN_KEYS) <= v022
    assert {k for k in ex.TORCHTITAN_MAIN_KEYS if "." in k} <= main
    titan = [e for e in EXPORTED if e[0].framework == "torchtitan"]
    assert len(titan) >= 5
    for layout, model, training, cluster, A in titan:
        args = ex.torchtitan_args(layout, model, training, cluster, A)
        assert {a[2:] for a in args if a.startswith("--")} <= main, layout.id
        assert args[-1].split(":")[0] == "activation-checkpoint"
        doc = tomllib.loads(ex.torchtitan_toml(layout, model, training, cluster, A))
        assert {f"{section}.{key}" for section, keys in doc.items() for key in keys} <= v022, layout.id


def test_deepspeed_exports_use_real_keys():
    real = _snapshot("deepspeed")
    n = 0
    for layout, model, training, cluster, A in EXPORTED:
        if layout.framework not in ("deepspeed", "megatron+deepspeed"):
            continue
        cfg = ex.deepspeed_config(layout, model, training, cluster, A)
        n += 1
        assert set(cfg) <= set(real["keys"]), layout.id
        zero = cfg["zero_optimization"]
        assert set(zero) <= set(real["zero_optimization"]), layout.id
        for section in ("offload_optimizer", "offload_param"):
            assert set(zero.get(section, {})) <= set(real[section]), (layout.id, section)
    assert n >= 3


# ----------------------------------------------------------------------------- Megatron-DeepSpeed

def test_megatron_deepspeed_pin_agrees_with_the_validation_run_and_the_snapshot():
    releases = {r["name"]: r for r in SCENARIOS["release"]}
    repo, commit = ex.MEGATRON_DEEPSPEED_PIN
    assert releases["megatron-deepspeed"]["repo"] == repo == _snapshot("megatron-deepspeed")["repo"]
    assert releases["megatron-deepspeed"]["commit"] == commit == _snapshot("megatron-deepspeed")["commit"]


def test_megatron_deepspeed_declares_the_shared_flags_alike():
    real = _snapshot("megatron-deepspeed")["flags"]
    for flag in ex.MEGATRON_DEEPSPEED_SHARED:
        spec = ex.MEGATRON_FLAGS[flag]
        assert flag in real, f"{flag} is not an option of Megatron-DeepSpeed"
        if spec.kind == "choice":
            assert set(spec.choices) <= set(real[flag]["choices"]), (flag, real[flag])
        if spec.kind in ("int", "float"):
            assert real[flag].get("type") == spec.kind, (flag, real[flag])
    for flag in ex.RESPELLED:      # Megatron-LM's spelling, which that parser would not take as written
        assert flag not in real or set(ex.MEGATRON_FLAGS[flag].choices) - set(real[flag].get("choices", ())), flag


def _mds_export(model, gpus, layout):
    res = advisor.audit(Cluster(gpu="A100-80GB", gpus=gpus), model, Layout(framework="megatron+deepspeed", **layout),
                        {"seq_len": 2048})
    assert res.ok, [f.rule_id for f in res.findings if f.severity == "error"]
    A = res.estimates.assumptions
    return (ex.megatron_args(res.layout, res.model, res.training, res.cluster, A),
            " ".join(ex.megatron_notes(res.layout, res.model, res.training, res.cluster, A)))


def _unusable(args, real):
    bad = []
    for i, token in enumerate(args):
        if token.startswith("--"):
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
            if token not in real or (value is not None and value not in real[token].get("choices", [value])):
                bad.append(token)
    return bad


@pytest.mark.parametrize("model, gpus, layout", [
    ("llama-2-7b", 16, dict(tp=2, pp=2, zero_stage=1, sp=True)),      # RoPE, RMSNorm, SwiGLU
    ("llama-3-8b", 16, dict(tp=2, pp=1, zero_stage=1, sp=True)),      # + GQA, RoPE base 500000
    ("gpt-3-5b", 16, dict(tp=2, pp=2, zero_stage=1, recompute="selective")),   # learned positions, LayerNorm
])
def test_megatron_deepspeed_exports_of_dense_models_use_only_its_flags(model, gpus, layout):
    args, notes = _mds_export(model, gpus, layout)
    assert not _unusable(args, _snapshot("megatron-deepspeed")["flags"]), _unusable(args, {})
    assert "has no equivalent" not in notes


def test_megatron_deepspeed_alibi_is_bigscience_forks_and_the_note_says_so():
    # BLOOM's ALiBi exists only in BigScience's fork: the flag is that fork's spelling, and the note names the fork
    args, notes = _mds_export("bloom-176b", 384, dict(tp=4, pp=12, zero_stage=1))
    assert _unusable(args, _snapshot("megatron-deepspeed")["flags"]) == ["--position-embedding-type"]
    assert "--position-embedding-type alibi" in notes and "bigscience-workshop/Megatron-DeepSpeed" in notes


@pytest.mark.parametrize("zero", [2, 3])
def test_megatron_deepspeed_zero_2_3_run_without_the_pipeline_engine(zero):
    """DeepSpeed's pipeline engine asserts ZeRO < 2: one stage is written --no-pipeline-parallel, and pretrain_gpt.py
    reads the stage (deepspeed.zero.Init at 3) from --zero-stage."""
    args, _ = _mds_export("llama-2-7b", 16, dict(tp=2, pp=1, zero_stage=zero, sp=True))
    text = " ".join(args)
    assert f"--zero-stage {zero}" in text and "--no-pipeline-parallel" in text
    assert "--deepspeed --deepspeed_config ds_config.json" in text
    assert not _unusable(args, _snapshot("megatron-deepspeed")["flags"])
    piped, _ = _mds_export("llama-2-7b", 16, dict(tp=2, pp=2, zero_stage=1, sp=True))
    assert "--no-pipeline-parallel" not in piped


def test_megatron_deepspeed_context_parallelism_is_ulysses_and_fp8_is_fp8_hybrid():
    args, _ = _mds_export("llama-2-7b", 16, dict(tp=2, pp=1, cp=2, zero_stage=1))
    assert "--ds-sequence-parallel-size 2" in " ".join(args) and "--context-parallel-size" not in args
    res = advisor.audit(Cluster(gpu="H100", gpus=16), "gpt-3-5b", Layout(framework="megatron+deepspeed", tp=2,
                        zero_stage=1), {"seq_len": 2048, "precision": "fp8"})
    assert res.ok, [f.rule_id for f in res.errors]
    fp8 = ex.megatron_args(res.layout, res.model, res.training, res.cluster)
    assert "--fp8-hybrid --transformer-impl transformer_engine" in " ".join(fp8)
    assert not _unusable(fp8, _snapshot("megatron-deepspeed")["flags"])


@pytest.mark.parametrize("model, training, layout, rule", [
    ("mixtral-8x7b", {}, dict(tp=2, zero_stage=1), "megatron-deepspeed.no-megatron-moe"),
    ("qwen2.5-7b", {}, dict(tp=2, zero_stage=1), "megatron-deepspeed.model-code"),          # --add-qkv-bias
    ("llama-3.1-8b", {}, dict(tp=2, zero_stage=1), "megatron-deepspeed.model-code"),        # --use-rope-scaling
    ("llama-2-7b", {"precision": "fp8"}, dict(tp=2, zero_stage=1), "megatron-deepspeed.fp8-te-layer"),  # SwiGLU
    ("gpt-3-5b", {"precision": "fp8-cs", "seq_len": 2048}, dict(tp=2, zero_stage=1), "megatron-deepspeed.fp8-te-layer"),
    ("llama-2-7b", {}, dict(tp=2, cp=2, sp=True, zero_stage=1), "megatron-deepspeed.ulysses-not-with-sequence-parallel"),
    ("llama-2-7b", {"task": "lora"}, dict(tp=2, zero_stage=1), "megatron-deepspeed.no-adapters"),
])
def test_what_megatron_deepspeed_cannot_run_is_an_audit_error_and_the_exports_refusal(model, training, layout, rule):
    cluster = Cluster(gpu="H100", gpus=16)
    res = advisor.audit(cluster, model, Layout(framework="megatron+deepspeed", **layout), {"seq_len": 4096, **training})
    assert rule in {f.rule_id for f in res.errors}
    with pytest.raises(advisor.InputError, match=f"forbidden by audit rule {rule}"):
        ex.megatron_args(res.layout, res.model, res.training, res.cluster)


def test_a_stated_torchtitan_release_that_cannot_pipeline_qwen3_keeps_one_stage():
    """torchtitan v0.2.2's qwen3 TrainSpec has no pipelining_fn: Qwen3-30B-A3B was given 2 stages there."""
    cluster = Cluster(gpu="H100", gpus=32)
    stated = advisor.recommend(cluster, "qwen3-30b-a3b", {"framework": "torchtitan", "framework_version": "v0.2.2"})
    assert stated.layout.framework == "torchtitan" and stated.layout.pp == 1
    rejects = [e for e in stated.trace.events if getattr(e, "rule_id", None) == "torchtitan.qwen3-pipelining-release"]
    assert rejects, "the trace names the rule that kept pp at 1"
    main = advisor.audit(cluster, "qwen3-30b-a3b", Layout(framework="torchtitan", pp=2, ep=8, etp=1, zero_stage=3),
                         {"framework": "torchtitan", "framework_version": "main"})
    assert "torchtitan.qwen3-pipelining-release" not in {f.rule_id for f in main.findings}
