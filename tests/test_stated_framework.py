"""The training stack a user states (Training.framework, issue 17's ruling): rules/stated-framework.toml
turns it into the frameworks and dimensions the planner may use; unstated, the advisor chooses freely
and the trace says so."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import advisor
from advisor import Cluster, Model, Training
from advisor.cli import main
from advisor.errors import InputError
from advisor.inputs.stacks import STACKS
from advisor.rulebook.actions import Decisions
from advisor.planner.families import family_framework

H100x8 = Cluster(gpu="H100", gpus=8)
H100x64 = Cluster(gpu="H100", gpus=64)
LLAMA70B = Model.preset("llama-3-70b")


def _rec(cluster, framework=None, version=None, model=LLAMA70B):
    return advisor.recommend(cluster, model, Training(seq_len=4096, framework=framework, framework_version=version))


def _fired(rec) -> list[str]:
    return [e.rule_id for e in rec.trace.events if e.op == "fire"]


# ----------------------------------------------------------------------------- inputs

def test_names_are_normalised_and_the_version_kept():
    t = Training(framework=" HF-TRL ", framework_version="0.19.1")
    assert (t.framework, t.framework_version) == ("hf-trl", "0.19.1")
    assert Training().framework is None and Training().framework_version is None


@pytest.mark.parametrize("bad", ["megatron", "trl", "", 3])
def test_unknown_framework_is_refused_naming_the_field_and_the_names(bad):
    with pytest.raises(InputError) as err:
        advisor.recommend(H100x8, LLAMA70B, {"framework": bad})
    text = str(err.value)
    assert "Training.framework" in text and all(name in text for name in STACKS)


@pytest.mark.parametrize("training, why", [
    ({"framework_version": "0.19"}, "None unless Training.framework is given"),
    ({"framework": "deepspeed", "framework_version": ""}, "printable characters"),
    ({"framework": "deepspeed", "framework_version": "x" * 65}, "printable characters"),
    ({"framework": "deepspeed", "framework_version": 19}, "valid string"),
])
def test_bad_version_is_refused_naming_its_field(training, why):
    with pytest.raises(InputError) as err:
        advisor.recommend(H100x8, LLAMA70B, training)
    assert "training.framework_version" in str(err.value).lower() and why in str(err.value)


# ----------------------------------------------------------------------------- the recommendation

def test_hf_trl_gets_a_sharded_data_parallel_layout_where_unstated_gets_megatron_tp():
    free, trl = _rec(H100x64), _rec(H100x64, "hf-trl")
    assert free.framework == "megatron" and free.layout.tp > 1            # the advisor's own choice
    assert trl.status == "recommended" and trl.framework in ("deepspeed", "torchtitan")
    assert (trl.layout.tp, trl.layout.pp, trl.layout.cp, trl.layout.ep) == (1, 1, 1, 1)
    assert trl.layout.zero_stage == 3
    assert all(a.layout.framework in ("deepspeed", "torchtitan") and a.layout.tp == a.layout.pp == 1
               for a in trl.alternatives)


def test_hf_trl_on_one_node_of_h100_for_llama_70b():
    rec = _rec(H100x8, "hf-trl")
    assert rec.framework == "deepspeed" and rec.layout.zero_stage == 3 and rec.layout.tp == rec.layout.pp == 1


def test_megatron_core_and_its_wrappers_give_megatron_layouts():
    for stack in ("megatron-core", "megatron-bridge", "nemo"):
        rec = _rec(H100x8, stack)
        assert rec.framework == "megatron" and rec.layout.framework == "megatron"
        assert all(a.layout.framework == "megatron" for a in rec.alternatives)
    assert _rec(H100x8).framework == "deepspeed"          # unstated: ZeRO on one node (the seed's row)


@pytest.mark.parametrize("stack, framework", [("deepspeed", "deepspeed"), ("torchtitan", "torchtitan"),
                                              ("megatron-deepspeed", "megatron+deepspeed")])
def test_each_stack_runs_only_on_its_frameworks(stack, framework):
    rec = _rec(H100x64, stack)
    assert rec.status == "recommended" and rec.framework == framework
    assert all(a.layout.framework == framework for a in rec.alternatives)
    if stack == "deepspeed":
        assert rec.layout.tp == 1 and all(a.layout.tp == 1 for a in rec.alternatives)


def test_megatron_lm_versions_read_by_the_rules():
    old = _rec(H100x64, "megatron-lm", "2019", model=Model.preset("llama-3-8b"))
    assert {"stack.megatron-lm-before-distributed-optimizer", "stack.megatron-lm-2019-no-pipeline"} <= set(_fired(old))
    assert old.layout.pp == 1 and old.layout.zero_stage == 0
    new = _rec(H100x64, "megatron-lm", "core_v0.16.1", model=Model.preset("llama-3-8b"))
    assert "stack.megatron-lm-before-distributed-optimizer" not in _fired(new) and new.layout.zero_stage >= 1


def test_a_stated_frameworks_zero_stages_bind_the_alternatives_too():
    # Megatron-LM 2021 has no distributed optimizer and no Megatron-FSDP: no layout of any family, the
    # choice or an alternative, may shard the optimizer (the zero-dp family's best used to come back as ZeRO-2)
    rec = advisor.recommend(Cluster(gpu="A100-80GB", gpus=256), "llama-2-13b",
                            {"seq_len": 2048, "global_batch_size": 1024, "framework": "megatron-lm",
                             "framework_version": "2021"})
    assert rec.layout.zero_stage == 0
    assert rec.alternatives and all(a.layout.zero_stage == 0 for a in rec.alternatives)


def test_megatron_lm_before_2022_gets_no_sequence_parallelism():
    # --sequence-parallel arrived in Megatron-LM in 2022: a 2021 stack gets TP layouts without it, in the
    # choice and in every alternative, and the trace says which rule turned it off
    rec = advisor.recommend(Cluster(gpu="A100-80GB", gpus=256), "llama-2-13b",
                            {"seq_len": 2048, "global_batch_size": 1024, "framework": "megatron-lm",
                             "framework_version": "2021"})
    assert rec.layout.tp > 1 and not rec.layout.sp
    assert all(not a.layout.sp for a in rec.alternatives)
    assert "disable sp" in rec.explain("full")
    modern = advisor.recommend(Cluster(gpu="A100-80GB", gpus=256), "llama-2-13b",
                               {"seq_len": 2048, "global_batch_size": 1024, "framework": "megatron-lm",
                                "framework_version": "core_v0.16.1"})
    assert modern.layout.tp == 1 or modern.layout.sp


def test_disable_wins_over_enable_in_either_order():
    from advisor.rulebook.actions import Disable, Enable
    for first, second in ((Enable(action="enable", feature="sp"), Disable(action="disable", feature="sp")),
                          (Disable(action="disable", feature="sp"), Enable(action="enable", feature="sp"))):
        d = Decisions()
        d.apply("a", first, {}, "")
        d.apply("b", second, {}, "")
        assert not d.has("sp")


def test_only_constraint_rules_bound_the_zero_stages_of_every_family():
    from advisor.rulebook.actions import AllowZero
    d = Decisions()
    d.apply("matrix.row", AllowZero(action="allow_zero", stages=[2, 3]), {}, "", "strategy")
    assert d.zero_bound is None                      # a strategy row's stages are its preference
    d.apply("stack.a", AllowZero(action="allow_zero", stages=[0, 1]), {}, "", "constraint")
    d.apply("stack.b", AllowZero(action="allow_zero", stages=[1, 2]), {}, "", "constraint")
    assert d.zero_bound == ((1,), "stack.a")         # constraints intersect


def test_unstated_framework_changes_no_recommendation():
    # the stack rules are inert when nothing is stated: same layout with and without them in the book
    for cluster, model in ((H100x8, LLAMA70B), (H100x64, LLAMA70B), (H100x8, Model.preset("llama-3-8b"))):
        rec = _rec(cluster, model=model)
        assert _fired(rec).count("stack.unstated") == 1
        assert not any(r.startswith("stack.") and r != "stack.unstated" for r in _fired(rec))
        assert rec.trace.input.framework is None


# ----------------------------------------------------------------------------- the trace

def test_trace_names_the_stated_framework_and_the_rule_that_applied_it():
    rec = _rec(H100x64, "hf-trl", "0.19.1")
    assert rec.trace.input.framework == "hf-trl" and rec.trace.input.framework_version == "0.19.1"
    fire = next(e for e in rec.trace.events if e.op == "fire" and e.rule_id == "stack.hf-trl-sharded-data-parallel-only")
    assert "hf-trl" in fire.message and "0.19.1" in fire.message
    skipped = [e for e in rec.trace.events if e.op == "note" and "family model-parallel not searched" in e.message]
    assert skipped and skipped[0].rule_id == "stack.hf-trl-sharded-data-parallel-only"
    assert "stack.hf-trl-sharded-data-parallel-only" in rec.explain("full")


def test_trace_says_when_the_advisor_chose_freely():
    rec = _rec(H100x8)
    note = next(e for e in rec.trace.events if e.rule_id == "stack.unstated")
    assert "not stated" in note.message


def test_hf_trl_with_nothing_that_fits_says_model_parallelism_is_not_available():
    small = Cluster(gpu="H100", gpus=2, host_memory_per_node="64 GiB", nvme_per_node="100 GiB")
    rec = advisor.recommend(small, Model.preset("llama-3.1-405b"),
                            Training(seq_len=4096, framework="hf-trl"))
    assert rec.status == "infeasible" and rec.layout is None
    assert any("family model-parallel not searched" in e.message for e in rec.trace.events)


# ----------------------------------------------------------------------------- the planner's mapping

def test_family_framework_follows_the_allowed_frameworks():
    d = Decisions()
    assert family_framework("zero-dp", "megatron", d) == "deepspeed"              # no restriction: as before
    assert family_framework("model-parallel", "megatron+deepspeed", d) == "megatron+deepspeed"
    d.frameworks = (("megatron",), "r")
    assert family_framework("zero-dp", "megatron", d) == "megatron"              # Megatron's DP / FSDP
    d.frameworks = (("deepspeed", "torchtitan"), "r")
    assert family_framework("model-parallel", "deepspeed", d) == "deepspeed"
    d.frameworks = (("torchtitan",), "r")
    assert family_framework("zero-dp", "torchtitan", d) == "torchtitan"


# ----------------------------------------------------------------------------- CLI

def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_cli_framework_flag_states_the_stack():
    code, out, _ = _cli(["recommend", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "64", "--seq-len", "4096",
                         "--framework", "hf-trl", "--framework-version", "0.19.1", "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["framework"] == "deepspeed" and doc["training"]["framework"] == "hf-trl"
    assert doc["training"]["framework_version"] == "0.19.1" and doc["layout"]["tp"] == 1


def test_cli_refuses_a_framework_name_it_does_not_know():
    code, _, err = _cli(["recommend", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "8", "--framework", "megatron"])
    assert code == 2 and "--framework" in err and "megatron-core" in err


def test_cli_audit_framework_keeps_its_layout_meaning():
    code, _, _ = _cli(["audit", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--framework", "deepspeed",
                       "--zero", "3"])
    assert code == 0


def test_nemo_fused_adam_bytes_are_not_an_error_when_nemo_is_stated():
    """megatron.optimizer-state-bytes v2: bf16 Adam states (NeMo 1.x's distributed fused Adam) cannot be
    written as a Megatron-LM launch line, but they are what a stated NeMo job runs."""
    layout = advisor.Layout(framework="megatron", tp=1, pp=1, dp=8, zero_stage=1)
    nemo_adam = {"megatron_optimizer_bytes": 4.0}
    plain = advisor.audit(H100x8, "llama-3-8b", layout, Training(seq_len=4096), assumptions=nemo_adam)
    nemo = advisor.audit(H100x8, "llama-3-8b", layout, Training(seq_len=4096, framework="nemo"), assumptions=nemo_adam)
    assert "megatron.optimizer-state-bytes" in {f.rule_id for f in plain.findings if f.severity == "error"}
    assert "megatron.optimizer-state-bytes" not in {f.rule_id for f in nemo.findings}


def test_a_stack_with_megatron_fsdp_shards_a_dense_model_before_tp_on_large_memory_gpus():
    """matrix.sharded-dp-before-tp: Megatron-Bridge (Megatron-FSDP) on 64 GB200 runs Llama 3 70B as sharded
    data parallelism, as its performance configs do; the same job unstated keeps the seed's TP + PP."""
    gb200 = Cluster(gpu="GB200", gpus=64)
    model = Model.preset("llama-3-70b")

    def rec(framework, version=None):
        return advisor.recommend(gb200, model, Training(seq_len=8192, global_batch_size=128, precision="fp8-cs",
                                                        framework=framework, framework_version=version))

    bridge = rec("megatron-bridge", "25.11")
    fired = {e.rule_id for e in bridge.trace.events if e.op == "fire"}
    assert "matrix.sharded-dp-before-tp" in fired
    assert (bridge.layout.tp, bridge.layout.pp) == (1, 1)
    assert all(a.layout != bridge.layout for a in bridge.alternatives)     # no family lists the choice again
    old_core = rec("megatron-core", "r0.8.0")                               # before --use-megatron-fsdp (core 0.15)
    assert "matrix.sharded-dp-before-tp" not in {e.rule_id for e in old_core.trace.events if e.op == "fire"}
    assert not advisor.audit(gb200, model, bridge.layout, bridge.training).errors


@pytest.mark.parametrize("version, number", [("core_v0.16.1", 16), ("0.15", 15), ("r0.8.0", 8), ("0.9", 9),
                                             ("25.11", 25011), ("main", 0), (None, 0), ("1", 1000)])
def test_a_release_is_a_number_rules_can_compare(version, number):
    from advisor.facts import release_number
    assert release_number(version) == number
