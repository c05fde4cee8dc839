"""Hostile input: every public entry point either returns a result or raises a pydantic
`ValidationError` or an `advisor.AdvisorError` subclass; the CLI exits 0/1/2 without a traceback.

The generators start from VALID inputs (presets, their dicts, legal layouts) and mutate a few
fields with values from realistic pools (near-valid numbers, other presets, a neighbouring shape)
or hostile ones (negative, zero, NaN, inf, 2**70, "80 GHz", wrong types, unknown keys), so most
examples get past validation and reach the planner, the cost model, the rule engine and the
renderers. Site rule files are fuzzed the same way: mutated TOML must raise only RuleFileError.

Example counts: modest by default (CI), doubled under HYPOTHESIS_PROFILE=thorough;
`ADVISOR_FUZZ_SCALE=40` multiplies every count (with the thorough profile, the issue's 10,000-input run). `ADVISOR_FUZZ_REPORT=path` writes the outcome counts as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from budget import examples  # tests/ is on sys.path (rootdir conftest)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import advisor
from advisor.cli import main as cli_main
from advisor.errors import AdvisorError, InputError, RuleFileError
from advisor.inputs import presets
from advisor.rulebook.load import MAX_RULE_FILE_BYTES, builtin_rules_dir, load_rulebook, read_site_files, site_rulebook

ACCEPTED = (ValidationError, AdvisorError)
SCALE = float(os.environ.get("ADVISOR_FUZZ_SCALE", "1"))
OUTCOMES: Counter = Counter()
WHERE: Counter = Counter()     # which field each accepted error named


def fuzz(n: int):
    """Settings for one fuzz test: n examples under HYPOTHESIS_PROFILE=thorough, half of them by default
    (times ADVISOR_FUZZ_SCALE either way), no deadline (the first call compiles the rule book), no
    too-slow health check (examples reach the planner)."""
    return settings(max_examples=max(1, int(examples(n // 2, thorough=n) * SCALE)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    path = os.environ.get("ADVISOR_FUZZ_REPORT")
    if path:
        Path(path).write_text(json.dumps({"outcomes": dict(sorted(OUTCOMES.items())),
                                          "fields": dict(WHERE.most_common())}, indent=1))


def attempt(kind: str, fn, *args, **kwargs):
    """Call fn; return its result, or None after an accepted error. Anything else propagates."""
    try:
        result = fn(*args, **kwargs)
    except ACCEPTED as exc:
        OUTCOMES[f"{kind}:{type(exc).__name__}"] += 1
        if isinstance(exc, ValidationError):
            WHERE[f"{kind}:{exc.title}." + ".".join(map(str, exc.errors()[0]["loc"]))] += 1
        else:
            WHERE[f"{kind}:{getattr(exc, 'field', type(exc).__name__)}"] += 1
        text = str(exc)
        assert text.strip(), f"{type(exc).__name__} without a message"
        if isinstance(exc, InputError):
            assert isinstance(exc.field, str) and exc.field, exc
            assert "have:" in text and "want:" in text, text
        return None
    OUTCOMES[f"{kind}:ok"] += 1
    return result


# ------------------------------------------------------------------------------------------------
# Value pools

HUGE = [2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 2**70, -(2**70), 10**30]
BAD_NUMBERS = [0, -1, -8, 0.0, -0.0, 0.5, 1e-300, 1e300, math.nan, math.inf, -math.inf, *HUGE]
BAD_STRINGS = ["", " ", "80", "80 GHz", "80 GiB/s", "-80 GiB", "0 GiB", "nan GiB", "inf GiB", "1e400 GiB",
               "1e-30 GiB", "GiB", "80 lbs", "2**70", "0x10", "1_000", "8k", "70B", "ten", "None", "null",
               "__import__('os')", "{gpu.memory}", "\x00", "é✓", "80 GiB; rm -rf /", "1" * 400]
WRONG_TYPES = [None, True, False, [], [8], {}, {"value": 8}, ["80 GiB"]]

wild_scalar = st.one_of(
    st.sampled_from(BAD_NUMBERS + BAD_STRINGS + WRONG_TYPES),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10)),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=6,
)
hostile = st.one_of(wild_scalar, json_value)

GPU_NAMES = [e["name"] for e in presets.gpu_entries()]
MODEL_NAMES = [e["name"] for e in presets.model_entries()]
# Presets the planner handles quickly on the cluster sizes below (the big ones are still drawn).
SMALL_MODELS = ["llama-2-7b", "llama-3-8b", "llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "llama-2-13b"]


@st.composite
def mostly(draw, usual, rare, one_in: int):
    """`usual`, except about 1 draw in `one_in` comes from `rare`. (st.one_of would not do: it
    drops repeated branches, so it cannot weight them.)"""
    return draw(rare if draw(st.integers(0, one_in - 1)) == 0 else usual)


def one_of_pool(pool, p_hostile: int = 8):
    """A pool value most of the time, a hostile value about 1 in p_hostile."""
    return mostly(st.sampled_from(pool), hostile, p_hostile)


BANDWIDTHS = ["900 GB/s", "400 Gbit/s", "50 GB/s", "1.8 TB/s", 9e11, 5e10, "25 GB/s", "100 Gbit/s"]
MEMORIES = ["80 GiB", "80GB", "40 GiB", "192 GiB", 85899345920, "2 TiB", "16 GiB", "1 GiB", "512 MiB"]
FLOPS = ["989 TFLOP/s", "312 TFLOP/s", "2.25 PFLOP/s", 9.89e14, "989 TFLOPS", "1 TFLOP/s", "10 GFLOP/s"]
DEGREES = [1, 1, 1, 2, 2, 4, 8, 16, 3, 0, -1, 64, 2**20, 2**21, 2**70]

CLUSTER_FIELDS = {
    "gpu": [*GPU_NAMES, "h100", "A100", "GB200-NVL72", "H100-PCIe", "TPU-v5"],
    "gpus": [1, 2, 4, 8, 8, 16, 32, 64, 128, 512, 4096, 7, 12, 24, 72, 144, 2**20, 2**20 + 1, 8.0, "8"],
    "gpus_per_node": [1, 2, 4, 8, 16, 72, 3, 6, 1024, 1025],
    "nvlink_domain": [1, 2, 8, 16, 72, 576, 3, 5, 2**20],
    "intra_node_bandwidth": BANDWIDTHS,
    "inter_node_bandwidth": BANDWIDTHS,
    "host_memory_per_node": ["2 TiB", "512 GiB", "1 TiB", 2**41, "80 GiB", "1 KiB"],
}
GPU_FIELDS = {
    "name": ["custom", "my-gpu", "H100"],
    "memory": MEMORIES,
    "peak_flops": FLOPS,
    "peak_flops_fp8": [None, "1979 TFLOP/s", 1.979e15],
    "nvlink_bandwidth": BANDWIDTHS,
    "gpus_per_node": [8, 4, 72, 1, 1024],
    "nvlink_domain": [None, 8, 72, 3],
    "network_bandwidth": BANDWIDTHS,
    "host_memory": ["2 TiB", 2**40],
    "source": ["test"],
}
TRAINING_FIELDS = {
    "seq_len": [2048, 4096, 8192, "8k", "4k", "32k", "128k", "1M", 4096.0, 4096.5, "8 GiB", "4k tokens", 1, 3, 1 << 24],
    "global_batch_size": [1, 8, 64, 128, 256, 512, 1024, 1000, 3, 1 << 24, 1 << 25],
    "micro_batch_size": [None, 1, 2, 4, 8, 3, 1 << 16],
    "precision": ["bf16", "fp16", "fp8", "fp32", "BF16", "int8"],
    "optimizer": ["adam", "adamw", "sgd"],
    "flash_attention": [True, False, "yes", 1],
}
LAYOUT_FIELDS = {
    "framework": ["megatron", "deepspeed", "megatron+deepspeed", "torchtitan", "fsdp", "Megatron"],
    "tp": DEGREES, "pp": DEGREES, "dp": [None, *DEGREES], "cp": DEGREES, "ep": DEGREES,
    "etp": [None, 1, 2, 4, 8, 3, 0], "vpp": [1, 1, 2, 3, 4, 0, 100],
    "sp": [True, False], "overlap_p2p_comm": [True, False],
    "zero_stage": [0, 1, 2, 3, 4, -1], "micro_batch_size": [1, 2, 4, 8, 3, 0, 1 << 16],
    "num_microbatches": [None, 1, 4, 8, 16, 7, 0, 1 << 24],
    "recompute": ["none", "selective", "full", "all"],
    "offload": ["none", "optimizer", "optimizer+params", "params"],
    "offload_device": ["cpu", "nvme", "gpu"],
}


@st.composite
def mutated(draw, base: dict, fields: dict, max_changes: int = 3):
    """`base` with up to `max_changes` fields replaced (pool or hostile values), sometimes a key
    dropped, sometimes an unknown key added."""
    out = dict(base)
    n = draw(st.sampled_from([0, 0, 0, 0, 1, 1, 1, 2, max_changes]))
    for key in draw(st.lists(st.sampled_from(sorted(fields)), min_size=n, max_size=n, unique=True)):
        out[key] = draw(one_of_pool(fields[key]))
    if out and draw(st.integers(0, 9)) == 0:
        out.pop(draw(st.sampled_from(sorted(out))))
    if draw(st.integers(0, 14)) == 0:
        out[draw(st.sampled_from(["gpu_count", "GPUS", "extra", "layers ", "tp_size", "__class__"]))] = draw(hostile)
    return out


@st.composite
def gpu_dicts(draw):
    base = dict(presets.gpu(draw(st.sampled_from(GPU_NAMES))))
    return draw(mutated(base, GPU_FIELDS, 2))


@st.composite
def cluster_dicts(draw):
    base = {"gpu": draw(st.sampled_from(GPU_NAMES)), "gpus": draw(st.sampled_from([1, 4, 8, 8, 16, 32, 64, 128]))}
    if draw(st.integers(0, 5)) == 0:
        base["gpu"] = draw(gpu_dicts())
    return draw(mutated(base, CLUSTER_FIELDS, 2))


def _shape_pool(value):
    """Neighbouring shapes of an architecture number: they break divisibility or the param count."""
    if not isinstance(value, int) or isinstance(value, bool):
        return [1, 2, 8]
    return sorted({1, 2, 3, max(1, value // 2), max(1, value - 1), value + 1, value * 2, value * 3, value})


@st.composite
def model_dicts(draw):
    name = draw(st.sampled_from(SMALL_MODELS * 3 + MODEL_NAMES))
    base = dict(presets.model(name))
    fields = {k: _shape_pool(v) for k, v in base.items()
              if k in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "experts",
                       "experts_per_token", "moe_ffn_hidden", "dense_layers", "head_dim", "max_position")}
    fields.update({
        "params": ["7B", "70B", "1.5e9", 7_000_000_000, "8.03B", 0, -1, "70 GiB", 2**70, "1e400"],
        "shared_experts": [0, 1, 2], "moe_layer_freq": [1, 2, 3], "mtp_layers": [0, 1, 17],
        "activation": ["swiglu", "gelu", "relu"], "norm": ["rmsnorm", "layernorm", "batchnorm"],
        "position_embedding": ["rope", "learned", "alibi", "none"], "tied_embeddings": [True, False],
        "seq_len": [None, 2048, 4096, 8192, 1 << 24, 1 << 25], "mla": [None, {"kv_lora_rank": 512,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}, {"kv_lora_rank": 0}],
        "kv_heads": [None, *fields.get("kv_heads", [1, 8]), 5, 7], "heads": [*fields.get("heads", [8]), 7, 48],
        "head_dim": [None, 64, 128, 96, 0],
    })
    model = draw(mutated(base, fields, 3))
    if draw(st.integers(0, 7)) == 0:       # inconsistent params given on purpose
        model["params"] = draw(st.sampled_from(fields["params"]))
    return model


@st.composite
def training_dicts(draw):
    if draw(st.integers(0, 4)) == 0:
        return None
    return draw(mutated({}, TRAINING_FIELDS, 3))


@st.composite
def layout_dicts(draw):
    base = draw(st.sampled_from([{"tp": 1}, {"tp": 2}, {"tp": 8}, {"tp": 2, "pp": 2}, {"tp": 4, "pp": 2, "sp": True},
                                 {"framework": "deepspeed", "zero_stage": 3}, {"tp": 8, "pp": 8, "vpp": 2},
                                 {"tp": 2, "cp": 2}, {"ep": 8, "tp": 1}, {"framework": "torchtitan", "tp": 2}]))
    return draw(mutated(base, LAYOUT_FIELDS, 3))


model_args = mostly(st.one_of(model_dicts(), st.sampled_from(SMALL_MODELS * 3 + MODEL_NAMES)),
                    one_of_pool(["llama-4", "LLAMA-3-8B", "gpt-5"], 2), 8)
cluster_args = mostly(cluster_dicts(), hostile, 10)


# ------------------------------------------------------------------------------------------------
# Checks on results


def check_provenance(version: str, engine: str, revision: str) -> None:
    assert version == advisor.__version__
    assert engine in ("durable", "python")
    assert revision.startswith("sha256:")


def check_recommendation(rec) -> None:
    assert isinstance(rec, advisor.Recommendation)
    assert rec.status in ("recommended", "infeasible")
    assert (rec.layout is None) == (rec.status == "infeasible")
    check_provenance(rec.trace.advisor_version, rec.trace.engine, rec.trace.ruleset_revision)
    json.loads(rec.model_dump_json())
    assert rec.explain("full")


def check_audit(report) -> None:
    assert isinstance(report, advisor.Audit)
    check_provenance(report.advisor_version, report.engine, report.ruleset_revision)
    json.loads(report.model_dump_json())
    assert report.explain()


# ------------------------------------------------------------------------------------------------
# The API


@fuzz(80)
@given(cluster=cluster_args, model=model_args, training=training_dicts())
def test_recommend_hostile(cluster, model, training):
    rec = attempt("recommend", advisor.recommend, cluster, model, training)
    if rec is not None:
        check_recommendation(rec)


@fuzz(120)
@given(cluster=cluster_args, model=model_args, layout=mostly(layout_dicts(), hostile, 10),
       training=training_dicts())
def test_audit_hostile(cluster, model, layout, training):
    report = attempt("audit", advisor.audit, cluster, model, layout, training)
    if report is not None:
        check_audit(report)


@fuzz(100)
@given(cluster=cluster_dicts(), model=model_dicts(), training=training_dicts(), layout=layout_dicts())
def test_constructors_and_estimate_hostile(cluster, model, training, layout):
    c = attempt("Cluster", advisor.Cluster, **cluster)
    m = attempt("Model", advisor.Model, **model)
    t = attempt("Training", advisor.Training, **(training or {}))
    lay = attempt("Layout", advisor.Layout, **layout)
    if None in (c, m, t, lay):
        return
    from advisor.inputs.specs import resolve_training

    t, _ = resolve_training(m, t)
    est = attempt("estimate", advisor.estimate, c, m, lay, t)
    if est is not None:
        json.loads(est.model_dump_json())
        assert est.memory.total >= 0


@fuzz(100)
@given(fields=st.dictionaries(st.sampled_from(sorted({*GPU_FIELDS, *CLUSTER_FIELDS, "bogus"})), hostile, max_size=5),
       kind=st.sampled_from(["GPU", "Cluster", "Model", "Training", "Layout", "MLA"]))
def test_constructors_arbitrary_json(fields, kind):
    attempt(kind, getattr(advisor, kind), **fields)


def _hf_config(draw_model: dict) -> dict:
    """A Hugging Face llama/mixtral-style config for a (possibly mutated) advisor model dict."""
    cfg = {"model_type": "mixtral" if draw_model.get("experts", 1) not in (1, None) else "llama",
           "num_hidden_layers": draw_model.get("layers"), "hidden_size": draw_model.get("hidden"),
           "num_attention_heads": draw_model.get("heads"), "num_key_value_heads": draw_model.get("kv_heads"),
           "intermediate_size": draw_model.get("ffn_hidden"), "vocab_size": draw_model.get("vocab"),
           "max_position_embeddings": draw_model.get("max_position"),
           "tie_word_embeddings": draw_model.get("tied_embeddings", False)}
    if cfg["model_type"] == "mixtral":
        cfg["num_local_experts"] = draw_model.get("experts")
        cfg["num_experts_per_tok"] = draw_model.get("experts_per_token")
    return {k: v for k, v in cfg.items() if v is not None}


HF_FILES = sorted((Path(__file__).parent / "data" / "hf").glob("*.json"))


def _hf_long_path_bug() -> bool:
    """Whether hf.py still lets OSError(ENAMETOOLONG) escape (fixed; see the regression tests at the end);
    while it does, the fuzz skips path strings over 255 bytes so it keeps looking for other bugs."""
    try:
        advisor.Model.from_hf_config("x" * 300)
    except OSError:
        return True
    except Exception:
        return False
    return False


HF_LONG_PATH_BUG = _hf_long_path_bug()


@fuzz(100)
@given(data=st.data())
def test_hf_config_hostile(data):
    if HF_FILES and data.draw(st.booleans()):
        cfg = json.loads(data.draw(st.sampled_from(HF_FILES)).read_text())
    else:
        cfg = _hf_config(data.draw(model_dicts()))
    for key in data.draw(st.lists(st.sampled_from(sorted(cfg) + ["model_type", "head_dim", "n_layer"]),
                                  max_size=3, unique=True)):
        cfg[key] = data.draw(one_of_pool(BAD_NUMBERS + ["llama", "gpt2", "bloom", 0, 7, 2**20], 2))
    if data.draw(st.integers(0, 9)) == 0:
        cfg = data.draw(hostile)
    if HF_LONG_PATH_BUG and isinstance(cfg, str) and len(cfg.encode("utf-8", "surrogatepass")) > 255:
        return
    m = attempt("from_hf_config", advisor.Model.from_hf_config, cfg)
    if m is not None:
        assert m.params > 0


# ------------------------------------------------------------------------------------------------
# The CLI

BAD_NUMS = ["0", "-1", "3", "7", "1e3", "8.0", "abc", "nan", "inf", "", str(2**70), "99999999999999999999999",
            "0x10", " 8"]
BAD_FLAGS = ["--bogus", "--explain=everything", "--format=yaml", "--engine=clips", "--precision=fp32", "--gpus",
             "--tp=-2", "--zero=4", "--framework=fsdp", "--rules=/nonexistent/site.toml", "--rules=/",
             "--seq-len=8 GiB", "--seq-len=-5", f"--seq-len={2**70}", "--global-batch=0", "--micro-batch=0",
             "--nvlink-domain=3", "--gpus-per-node=3", "--offload-device=nvme", "--offload=optimizer+params"]


@st.composite
def cli_argv(draw):
    """Mostly valid command lines with 0-2 corruptions (a bad value, a bad or missing flag)."""
    cmd = draw(st.sampled_from(["recommend", "recommend", "audit", "audit", "audit", "presets", "rules", "facts", "bogus"]))
    if cmd not in ("recommend", "audit"):
        return [cmd] + draw(st.sampled_from([[], ["--json"], ["--help-me"]]))
    opts: dict[str, str | None] = {}

    def opt(flag, pool, p=2):
        if draw(st.integers(0, p - 1)) == 0:
            opts[flag] = draw(st.sampled_from(pool))

    if draw(st.integers(0, 9)):
        opts["--model"] = draw(st.sampled_from(SMALL_MODELS * 3 + MODEL_NAMES))
    else:
        opts["--hf-config"] = draw(st.sampled_from([str(p) for p in HF_FILES] + ["/nonexistent/config.json", "/",
                                                                                 str(HF_FILES[0].parent) if HF_FILES else "."]))
    opts["--gpu"] = draw(st.sampled_from(GPU_NAMES + ["h100", "A100"]))
    opts["--gpus"] = draw(st.sampled_from(["8", "8", "16", "64", "4", "1", "128"]))
    opt("--seq-len", ["4096", "8k", "2048", "32k"], 3)
    opt("--global-batch", ["64", "128", "256", "512", "1024"], 3)
    opt("--precision", ["bf16", "fp16", "fp8"], 4)
    opt("--engine", ["durable", "python"], 4)
    opt("--format", ["text", "json", "megatron", "deepspeed", "torchtitan"], 2)
    opt("--micro-batch", ["1", "2", "4"], 4)
    opt("--json", [None], 4)
    opt("--no-flash-attention", [None], 6)
    if cmd == "recommend":
        opt("--explain", ["summary", "full"], 3)
    else:
        for dim in ("--tp", "--pp", "--cp", "--ep", "--etp", "--vpp", "--dp", "--num-microbatches"):
            opt(dim, ["1", "1", "2", "4", "8"], 3 if dim in ("--tp", "--pp") else 6)
        opt("--framework", ["megatron", "deepspeed", "megatron+deepspeed", "torchtitan"], 3)
        opt("--zero", ["0", "1", "2", "3"], 3)
        opt("--recompute", ["none", "selective", "full"], 4)
        opt("--offload", ["none", "optimizer"], 6)
        opt("--sp", [None], 4)
        opt("--no-overlap-p2p", [None], 6)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
        how = draw(st.integers(0, 3))
        if how == 0 and opts:                  # a bad value for an option that takes one
            flag = draw(st.sampled_from(sorted(f for f, v in opts.items() if v is not None)))
            opts[flag] = draw(st.sampled_from(BAD_NUMS + GPU_NAMES[:2] + ["gpt-5", "8 GiB"]))
        elif how == 1 and opts:                # a required option missing
            opts.pop(draw(st.sampled_from(sorted(opts))))
        else:                                  # a bad flag
            opts[draw(st.sampled_from(BAD_FLAGS))] = None
    argv = [cmd]
    for flag, value in opts.items():
        argv += [flag] if value is None else [flag, value]
    return argv


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as exc:       # argparse: usage errors exit 2, --help exits 0
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return code, out.getvalue(), err.getvalue()


@fuzz(100)
@given(argv=cli_argv())
def test_cli_hostile(argv):
    code, out, err = run_cli(argv)
    OUTCOMES[f"cli:exit{code}"] += 1
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out
    if code == 2:
        assert err.strip(), f"exit 2 without a message: {argv}"
    if code == 0 and "--format" not in argv and argv[0] in ("recommend", "audit") and "--json" in argv:
        json.loads(out)


def test_cli_examples():
    """A few fixed hostile command lines (fast, always run)."""
    for argv, want in [
        (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "0"], 2),
        (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", str(2**70)], 2),
        (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "nan"], 2),
        (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--seq-len", "8 GiB"], 2),
        (["recommend", "--model", "no-such-model", "--gpu", "H100", "--gpus", "8"], 2),
        (["audit", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--tp", "-2"], 2),
        (["audit", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--tp", "3"], 1),
        (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--rules", "/nonexistent.toml"], 2),
    ]:
        code, _out, err = run_cli(argv)
        assert code == want, (argv, code, err)
        assert "Traceback" not in err
        if code == 2:
            assert "error" in err


# ------------------------------------------------------------------------------------------------
# Fixed hostile inputs the issue names (each must fail with a message naming the field)


@pytest.mark.parametrize("kwargs, field", [
    ({"gpu": "H100", "gpus": -8}, "gpus"),
    ({"gpu": "H100", "gpus": 0}, "gpus"),
    ({"gpu": "H100", "gpus": 2**70}, "gpus"),
    ({"gpu": "H100", "gpus": math.nan}, "gpus"),
    ({"gpu": "H100", "gpus": math.inf}, "gpus"),
    ({"gpu": "H100", "gpus": "eight"}, "gpus"),
    ({"gpu": "H100", "gpus": 8, "intra_node_bandwidth": "80 GHz"}, "intra_node_bandwidth"),
    ({"gpu": "H100", "gpus": 8, "host_memory_per_node": "-2 TiB"}, "host_memory_per_node"),
    ({"gpu": "H100", "gpus": 8, "gpu_count": 8}, "gpu_count"),
    ({"gpu": {"memory": "80 GHz", "peak_flops": "989 TFLOP/s", "nvlink_bandwidth": "900 GB/s"}, "gpus": 8}, "memory"),
    ({"gpu": {"memory": "80 GiB", "peak_flops": math.nan, "nvlink_bandwidth": "900 GB/s"}, "gpus": 8}, "peak_flops"),
])
def test_cluster_rejections_name_the_field(kwargs, field):
    with pytest.raises(ValidationError) as info:
        advisor.Cluster(**kwargs)
    assert field in str(info.value)


LLAMA8 = dict(presets.model("llama-3-8b"))


@pytest.mark.parametrize("changes, field", [
    ({"kv_heads": 5}, "kv_heads"),              # does not divide heads (32)
    ({"heads": 30}, "hidden"),                  # hidden 4096 % 30 != 0 with no head_dim
    ({"params": "70B"}, "params"),              # contradicts the shape (~8B)
    ({"params": 2**70}, "params"),
    ({"layers": 0}, "layers"),
    ({"hidden": -4096}, "hidden"),
    ({"vocab": math.inf}, "vocab"),
    ({"experts_per_token": 2}, "experts_per_token"),   # more than experts (1)
    ({"layers": "32 GiB"}, "layers"),
    ({"number_of_layers": 32}, "number_of_layers"),
])
def test_model_rejections_name_the_field(changes, field):
    with pytest.raises(ValidationError) as info:
        advisor.Model(**(LLAMA8 | changes))
    assert field in str(info.value)


@pytest.mark.parametrize("changes, field", [
    ({"seq_len": "8 GiB"}, "seq_len"),
    ({"seq_len": -1}, "seq_len"),
    ({"seq_len": 2**70}, "seq_len"),
    ({"global_batch_size": 0}, "global_batch_size"),
    ({"precision": "fp32"}, "precision"),
])
def test_training_rejections_name_the_field(changes, field):
    with pytest.raises(ValidationError) as info:
        advisor.Training(**changes)
    assert field in str(info.value)


def test_api_wrong_types_are_input_errors():
    with pytest.raises(InputError, match="cluster"):
        advisor.recommend(["H100", 8], "llama-3-8b")
    with pytest.raises(InputError, match="model"):
        advisor.recommend({"gpu": "H100", "gpus": 8}, 8e9)
    with pytest.raises(InputError, match="training"):
        advisor.recommend({"gpu": "H100", "gpus": 8}, "llama-3-8b", "bf16")
    with pytest.raises(InputError, match="layout"):
        advisor.audit({"gpu": "H100", "gpus": 8}, "llama-3-8b", "tp8")


# ------------------------------------------------------------------------------------------------
# Site rule files

GOOD_RULE = '''
[[rule]]
id = "site.fuzz-rule"
version = 1
title = "Fuzz rule"
tier = "{tier}"
when = {{ all = ["cluster.gpus >= 8", "model.params_b > 1.5"] }}
then = [{{ action = "checklist" }}]
message = "{{cluster.gpus}} GPUs"
rationale = "A rule written by the fuzz test."
references = [{{ title = "Fuzz", url = "https://example.org" }}]
examples = {{ fire = [{{ "cluster.gpus" = 8, "model.params_b" = 7.0 }}], no_fire = [{{ "cluster.gpus" = 4 }}] }}
'''


def _tier() -> str:
    import tomllib

    return next(iter(tomllib.loads((builtin_rules_dir() / "tiers.toml").read_text())["tiers"]))


TIER = _tier()
BASE_RULE_FILE = GOOD_RULE.format(tier=TIER)

RULE_SNIPPETS = [
    'when = "cluster.gpus >= 8"', 'when = "cluster.gpus >= 1e400"', 'when = "cluster.gpus >= 99999999999999999999"',
    'when = "cluster.gpus >= nan"', 'when = "cluster.gpus >= inf"', 'when = "cluster.gpus == \'8\'"',
    'when = "cluster.gpu_name < \'H100\'"', 'when = "cluster.nope == 1"', 'when = "cluster.gpus ~= 8"',
    'when = "cluster.gpus in []"', 'when = "cluster.gpus in [1, \'a\']"', 'when = "__import__(\'os\').system(\'x\') == 0"',
    'when = { all = [] }', 'when = { none = ["cluster.gpus > 1"] }', 'when = { all = "cluster.gpus > 1" }',
    'when = { any = ["layout.tp > 1"] }', 'when = 7', 'when = ["cluster.gpus > 1"]',
    'then = [{ action = "exec", code = "import os" }]', 'then = [{ action = "finding", severity = "error", fix = "x" }]',
    'then = []', 'then = "checklist"', 'then = [{ action = "limit", dimension = "tp" }]', 'then = [{ action = "limit", dimension = "xp", max = 8 }]',
    'then = [{ action = "limit", dimension = "tp", max = "cluster.gpu_name" }]', 'then = [{ action = "limit", dimension = "tp", max = 0 }]',
    'then = [{ action = "limit", dimension = "tp", max = "cluster.gpus" }]', 'then = [{ action = "checklist", text = 1 }]',
    'then = [{ action = "enable", feature = "rm-rf" }]', 'then = [{ action = "use_framework", framework = "megatron" }]',
    'message = "{cluster.nope}"', 'message = "{cluster.gpus:!r}"', 'message = "{cluster.gpus.__class__}"',
    'message = "{0}"', 'message = "{{}}"', 'message = ""',
    'id = "Site Rule"', 'id = "matrix.small-cluster-zero"', 'id = 7', 'version = 0', 'version = "1"', 'tier = "nope"',
    'references = []', 'references = [{ title = "No link" }]', 'examples = { fire = [], no_fire = [] }',
    'examples = { fire = [{ "cluster.nope" = 1 }], no_fire = [{ "cluster.gpus" = 1 }] }',
    'examples = { fire = [{ "cluster.gpus" = "8" }], no_fire = [{ "cluster.gpus" = 1 }] }',
    'status = "beta"', 'extra = 1', 'scope = "layout"', 'scope = "global"', 'pri = -1',
]


@st.composite
def rule_files(draw):
    lines = BASE_RULE_FILE.splitlines()
    mode = draw(st.integers(0, 5))
    if mode <= 2:                               # replace / add field lines
        for snippet in draw(st.lists(st.sampled_from(RULE_SNIPPETS), min_size=1, max_size=3)):
            key = snippet.split("=")[0].strip()
            idx = next((i for i, ln in enumerate(lines) if ln.startswith(key + " =")), None)
            if key == "scope":
                lines.insert(0, snippet)
            elif idx is None or draw(st.integers(0, 4)) == 0:
                lines.insert(draw(st.integers(2, len(lines))), snippet)
            else:
                lines[idx] = snippet
    elif mode == 3:                             # delete lines / duplicate the rule
        for _ in range(draw(st.integers(1, 3))):
            if len(lines) > 1:
                del lines[draw(st.integers(0, len(lines) - 1))]
        if draw(st.booleans()):
            lines += lines
    elif mode == 4:                             # byte-level damage
        text = "\n".join(lines)
        pos = draw(st.integers(0, len(text)))
        junk = draw(st.text(max_size=6) | st.sampled_from(['"', "[", "]]", "{", "\\", "\x00", "'''", "\ud800"]))
        return (text[:pos] + junk + text[pos + draw(st.integers(0, 5)):])
    else:                                       # a completely different document
        return draw(st.sampled_from(["", "rule = 1", "[[rule]]", "[rule]\nid = 'x'", "scope = 'layout'",
                                     "\x00\x01", "a = 1\na = 2", '[[rule]]\nid = "site.x"\n' * 61]))
    return "\n".join(lines)


def _load_one(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "site-fuzz.toml"
        if isinstance(text, str):
            path.write_bytes(text.encode("utf-8", "surrogatepass"))
        else:
            path.write_bytes(text)
        try:
            # the path a call with site rules takes (rulebook_for): the built-in rules as compiled once,
            # the site file compiled from its bytes; load_rulebook((path,)) runs the same site-file code
            # after compiling the 14 built-in files again (the tests below call it once each)
            book = site_rulebook(read_site_files((path,)))
        except RuleFileError as exc:
            OUTCOMES["rulefile:RuleFileError"] += 1
            assert str(exc).strip()
            return
        OUTCOMES["rulefile:ok"] += 1
        assert "site.fuzz-rule" in book.rules or any(r.path == str(path) for r in book.rules.values())


@fuzz(100)
@given(text=rule_files())
def test_rule_file_mutations_raise_only_rule_file_error(text):
    _load_one(text)


@fuzz(40)
@given(data=st.binary(max_size=300))
def test_rule_file_random_bytes(data):
    _load_one(data)


def test_base_rule_file_loads():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "site-fuzz.toml"
        path.write_text(BASE_RULE_FILE)
        book = load_rulebook((path,))
    assert "site.fuzz-rule" in book.rules


def test_rule_file_over_size_limit_is_refused(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_text(BASE_RULE_FILE + "#" * (MAX_RULE_FILE_BYTES + 1) + "\n")
    with pytest.raises(RuleFileError, match="at most") as info:
        load_rulebook((path,))
    assert info.value.field == "file"


def test_rule_file_unknown_action_names_file_rule_and_field(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(BASE_RULE_FILE.replace('action = "checklist"', 'action = "shell", command = "rm -rf /"'))
    with pytest.raises(RuleFileError) as info:
        load_rulebook((path,))
    assert info.value.path == str(path) and info.value.rule_id == "site.fuzz-rule"
    assert info.value.field.startswith("then")


def test_rule_file_unknown_operator_names_file_rule_and_field(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(BASE_RULE_FILE.replace('"cluster.gpus >= 8"', '"cluster.gpus =~ 8"'))
    with pytest.raises(RuleFileError) as info:
        load_rulebook((path,))
    assert (info.value.path, info.value.rule_id) == (str(path), "site.fuzz-rule")
    assert info.value.field.startswith("when")


# ------------------------------------------------------------------------------------------------
# Found by the fuzzing (fixed; kept as regression tests)


def test_hf_config_path_too_long_is_an_input_error():
    with pytest.raises(InputError, match="hf_config"):
        advisor.Model.from_hf_config("1" * 400)


def test_cli_hf_config_path_too_long_exits_2():
    code, _out, err = run_cli(["recommend", "--hf-config", "x" * 300, "--gpu", "H100", "--gpus", "8"])
    assert code == 2 and "hf_config" in err


@pytest.mark.parametrize("argv,field,have", [
    (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "0"], "Cluster.gpus", "0"),
    (["recommend", "--model", "llama-3-8b", "--gpu", "H100x", "--gpus", "8"], "Cluster.gpu", "'H100x'"),
    (["recommend", "--model", "mixtral-8x7b", "--gpu", "H100", "--gpus", "64", "--assume", 'moe_token_dispatcher="allgather"'],
     "Assumptions.moe_token_dispatcher", "'allgather'"),
    (["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--assume", "ep_overlap=2"],
     "Assumptions.ep_overlap", "2"),
])
def test_cli_validation_errors_read_as_have_want(argv, field, have):
    """pydantic's refusals print in advisor's form: the field, what was given, what is wanted; once
    each, without pydantic's documentation links."""
    code, _out, err = run_cli(argv)
    assert code == 2, err
    assert err.startswith(f"advisor: error: {field}: invalid value\n"), err
    assert f"  have: {have}\n" in err and "  want: " in err, err
    assert "errors.pydantic.dev" not in err and err.count("have:") == 1, err


_A100x8 = {"gpu": "A100-80GB", "gpus": 8}
_TRAIN = {"seq_len": 4096, "global_batch_size": 64}


@pytest.mark.parametrize("args, field", [
    ((_A100x8, "llama-9b", {"dp": 8}, _TRAIN), "Model.preset"),
    ((_A100x8, "llama-2-7b", 42, _TRAIN), "layout"),
    ((_A100x8, "llama-2-7b", {"dp": 8}, None), "training.seq_len"),
    (({"gpu": "A100-80GB"}, "llama-2-7b", {"dp": 8}, _TRAIN), "gpus"),
])
def test_estimate_names_the_bad_field_instead_of_failing_inside(args, field):
    """advisor.estimate takes what recommend and audit take (dicts, a preset name); bad input is an
    error naming the field, never an AttributeError from inside the cost model."""
    with pytest.raises((advisor.AdvisorError, ValueError)) as info:
        advisor.estimate(*args)
    assert field in str(info.value)
    assert not isinstance(info.value, AttributeError)
    dicts = advisor.estimate(_A100x8, "llama-2-7b", {"dp": 8}, _TRAIN)
    objects = advisor.estimate(advisor.Cluster(**_A100x8), advisor.Model.preset("llama-2-7b"), advisor.Layout(dp=8),
                               advisor.Training(**_TRAIN))
    assert dicts == objects
