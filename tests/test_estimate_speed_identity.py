"""The cost model's speed-ups (issue 8) change no result.

`estimate` / `memory_only` cache what depends only on (cluster, model, training) per object triple
(context._static) and per-layer activations across calls (memory._acts); the planner sizes a layout
once (`size`) and builds its Estimate from that sizing (`estimate_of`). Two kinds of checks:

- golden: for the cases below, tests/golden/estimate/<id>.json holds the Estimate (every field,
  floats to 12 significant digits; see tests/golden_files.py). The planner's path (`size`, then
  `estimate_of`) and `memory_only` must give the same, to the last bit. A deliberate change of the
  cost model changes the files: regenerate with `python tests/golden/regenerate.py`, review
  `git diff tests/golden` and say why in the commit.
- invariance: whatever the caches hold (cold, warm, after memory_only of the same layout, equal but
  not identical inputs, many threads), every result is the same.
"""

from __future__ import annotations

import pytest

from advisor import Assumptions, Cluster, Layout, Model, Training, estimate
from advisor.costmodel import memory_only
from advisor.costmodel.sizing import estimate_of, size, step_time_of
from golden_files import check, estimate_data
from threads import run_in_threads  # tests/ is on sys.path (rootdir conftest)

# (id, cluster kwargs, model preset, layout kwargs, training kwargs, assumptions kwargs or None)
CASES = [
    ("70b-tp8pp2-zero1", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b",
     dict(tp=8, pp=2, sp=True, zero_stage=1), dict(seq_len=8192, global_batch_size=512), None),
    ("70b-tp8pp4-vpp5-sel", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b",
     dict(tp=8, pp=4, vpp=5, sp=True, zero_stage=1, recompute="selective"), dict(seq_len=8192, global_batch_size=128),
     None),
    ("70b-pp3-uneven-full", dict(gpu="H100-SXM-80GB", gpus=48), "llama-3-70b",
     dict(tp=8, pp=3, sp=True, zero_stage=1, recompute="full", micro_batch_size=2),
     dict(seq_len=4096, global_batch_size=64), None),
    ("70b-pp7-mid-heavier", dict(gpu="H100-SXM-80GB", gpus=56), "llama-3-70b",
     dict(tp=8, pp=7, sp=True, vpp=2, num_microbatches=9), dict(seq_len=4096, global_batch_size=9), None),
    ("405b-128k-cp16", dict(gpu="H100-SXM-80GB", gpus=16384), "llama-3.1-405b",
     dict(tp=8, pp=16, cp=16, sp=True, zero_stage=1, vpp=2), dict(seq_len="128k", global_batch_size=128), None),
    ("gpt3-175b-nonflash", dict(gpu="A100-80GB", gpus=1024), "gpt-3-175b",
     dict(tp=8, pp=16, sp=True, zero_stage=1, recompute="selective"),
     dict(seq_len=2048, global_batch_size=1536, flash_attention=False), None),
    ("gpt3-fp16-zero0", dict(gpu="A100-80GB", gpus=1024), "gpt-3-175b",
     dict(tp=8, pp=8, recompute="full"), dict(seq_len=2048, global_batch_size=1536, precision="fp16"), None),
    ("bloom-ds-zero1-pp", dict(gpu="A100-80GB", gpus=96), "bloom-176b",
     dict(framework="megatron+deepspeed", tp=4, pp=12, zero_stage=1, recompute="full"),
     dict(seq_len=2048, global_batch_size=384), None),
    ("deepseek-v3-ep", dict(gpu="H100-SXM-80GB", gpus=2048), "deepseek-v3",
     dict(tp=2, pp=16, ep=64, sp=True, zero_stage=1, recompute="full"), dict(seq_len=4096, global_batch_size=4096),
     None),
    ("deepseek-v3-etp", dict(gpu="H100-SXM-80GB", gpus=2048), "deepseek-v3",
     dict(tp=4, pp=8, ep=32, etp=2, sp=True, zero_stage=1, vpp=2), dict(seq_len=4096, global_batch_size=4096),
     dict(moe_load_imbalance=1.3, ep_overlap=0.3)),
    ("mixtral-ep8", dict(gpu="H100-SXM-80GB", gpus=64), "mixtral-8x7b",
     dict(tp=2, ep=8, sp=True, zero_stage=1, recompute="selective"), dict(seq_len=4096, global_batch_size=512), None),
    ("70b-ds-zero3-offload-cpu", dict(gpu="A100-40GB", gpus=8), "llama-2-70b",
     dict(framework="deepspeed", zero_stage=3, offload="optimizer+params", recompute="full"),
     dict(seq_len=4096, global_batch_size=64), None),
    ("70b-ds-zero3-offload-nvme", dict(gpu="A100-40GB", gpus=8), "llama-2-70b",
     dict(framework="deepspeed", zero_stage=3, offload="optimizer", offload_device="nvme", recompute="full"),
     dict(seq_len=4096, global_batch_size=64), dict(deepspeed_fp32_grad_partition=False)),
    ("7b-ds-zero2", dict(gpu="A100-80GB", gpus=8), "llama-2-7b",
     dict(framework="deepspeed", zero_stage=2, micro_batch_size=2), dict(seq_len=4096, global_batch_size=128), None),
    ("7b-ds-ulysses-cp", dict(gpu="A100-80GB", gpus=16), "llama-2-7b",
     dict(framework="deepspeed", cp=4, zero_stage=1), dict(seq_len=32768, global_batch_size=16), None),
    ("8b-torchtitan-fsdp2", dict(gpu="H100-SXM-80GB", gpus=16), "llama-3-8b",
     dict(framework="torchtitan", zero_stage=2, tp=2, sp=True), dict(seq_len=8192, global_batch_size=64), None),
    ("8b-torchtitan-fsdp3-offload", dict(gpu="H100-SXM-80GB", gpus=16), "llama-3-8b",
     dict(framework="torchtitan", zero_stage=3, offload="optimizer"), dict(seq_len=8192, global_batch_size=64), None),
    ("70b-megatron-fsdp", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b",
     dict(tp=4, zero_stage=3, sp=True, recompute="selective"), dict(seq_len=8192, global_batch_size=512), None),
    ("70b-fp8-tpoverlap", dict(gpu="H100-SXM-80GB", gpus=256), "llama-3-70b",
     dict(tp=8, pp=4, sp=True, zero_stage=1, vpp=5, overlap_p2p_comm=False),
     dict(seq_len=8192, global_batch_size=1024, precision="fp8"),
     dict(tp_comm_overlap=True, dropout_masks=True, overlap_grad_reduce=False, elementwise_traffic=0.0)),
    ("falcon-40b-gelu", dict(gpu="A100-40GB", gpus=64), "falcon-40b",
     dict(tp=8, pp=2, sp=True, zero_stage=1, recompute="full"),
     dict(seq_len=2048, global_batch_size=256, flash_attention=False), None),
    ("mixtral-8x22b-gb200", dict(gpu="GB200", gpus=144), "mixtral-8x22b",
     dict(tp=2, pp=4, ep=4, etp=1, sp=True, zero_stage=1), dict(seq_len=8192, global_batch_size=252), None),
    ("qwen-72b-mi300x-cp", dict(gpu="MI300X", gpus=16), "qwen2.5-72b",
     dict(tp=8, cp=2, sp=True, zero_stage=1, recompute="full"), dict(seq_len=32768, global_batch_size=64), None),
    ("13b-v100-half-node", dict(gpu="V100-32GB", gpus=4), "llama-2-13b",
     dict(framework="deepspeed", zero_stage=3, offload="optimizer", recompute="full"),
     dict(seq_len=2048, global_batch_size=32, precision="fp16"), None),
    ("7b-custom-network", dict(gpu="H100-SXM-80GB", gpus=64, nvlink_domain=16, host_memory_per_node="512GB",
                               inter_node_bandwidth="25GB/s"), "llama-2-7b",
     dict(tp=2, pp=2, zero_stage=1, vpp=4), dict(seq_len=4096, global_batch_size=256),
     dict(latency_network=5e-5, pp_overlap=0.5)),
]


def case_objects(case):
    _id, cl, model, lay, tr, assumptions = case
    return (Cluster(**cl), Model.preset(model), Layout(**lay), Training(**tr),
            Assumptions(**assumptions) if assumptions is not None else None)


def exact(result) -> str:
    """Every field, floats to the last bit, dict order: for comparing results with each other."""
    return repr(result.model_dump())


def golden_name(case) -> str:
    return f"estimate/{case[0]}"


def goldens() -> dict:
    """Every golden file of this module, name -> function giving its data: for tests/golden/regenerate.py."""
    return {golden_name(c): (lambda c=c: estimate_data(estimate(*case_objects(c)))) for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_results_match_the_golden_files(case):
    cluster, model, layout, training, A = case_objects(case)
    est = estimate(cluster, model, layout, training, A)
    check(golden_name(case), estimate_data(est))
    want_est, step, total = exact(est), est.step_time, est.memory.total
    # memory_only gives the estimate's memory
    want_mem = exact(est.memory)
    assert exact(memory_only(cluster, model, layout, training, A)) == want_mem
    # the planner's path: one sizing, then its step time and (for the output) its Estimate
    sized = size(cluster, model, layout, training, A)
    assert (step_time_of(sized), sized.total, sized.fits) == (step, total, est.memory.fits)
    assert exact(estimate_of(sized)) == want_est
    layout2 = layout.model_copy()
    assert exact(memory_only(cluster, model, layout2, training, A)) == want_mem
    assert exact(estimate(cluster, model, layout2, training, A)) == want_est


def _fresh(case):
    """Equal inputs, new objects: no identity-keyed cache can be hit."""
    return case_objects(case)


def test_results_do_not_depend_on_cache_state():
    cold = {}
    for case in CASES:
        cluster, model, layout, training, A = _fresh(case)
        cold[case[0]] = (estimate(cluster, model, layout, training, A).model_dump(),
                         memory_only(cluster, model, layout, training, A).model_dump())
    # warm: one triple of objects per case, many layouts through it in a different order, each
    # estimate after a memory_only of the same layout object and after unrelated ones
    objs = {case[0]: _fresh(case) for case in CASES}
    for case in reversed(CASES):
        cluster, model, layout, training, A = objs[case[0]]
        for other in CASES:
            o_layout = Layout(**other[3])
            try:
                memory_only(cluster, model, o_layout, training, A)
            except Exception:  # noqa: BLE001 - layouts of other cases may not fit this world size
                pass
        mem = memory_only(cluster, model, layout, training, A)
        memory_only(cluster, model, layout.model_copy(update={"recompute": "full"}), training, A)
        est = estimate(cluster, model, layout, training, A)
        assert (est.model_dump(), mem.model_dump()) == cold[case[0]]
        # an estimate whose layout memory_only saw with other assumptions must not reuse that
        other_A = Assumptions(fragmentation_fraction=0.2)
        memory_only(cluster, model, layout, training, other_A)
        assert estimate(cluster, model, layout, training, A).model_dump() == cold[case[0]][0]
        assert estimate(cluster, model, layout, training, other_A).model_dump() != cold[case[0]][0]


def test_results_are_independent_objects():
    """Cached parts are never shared mutably between results."""
    cluster, model, layout, training, A = _fresh(CASES[0])
    mem = memory_only(cluster, model, layout, training, A)
    est = estimate(cluster, model, layout, training, A)
    assert est.memory.detail == mem.detail and est.memory.detail is not mem.detail
    mem.detail["act_layers"] = -1
    assert estimate(cluster, model, layout, training, A).memory.detail["act_layers"] > 0
    assert memory_only(cluster, model, layout, training, A).detail["act_layers"] > 0


def test_same_results_from_many_threads():
    objs = [_fresh(case) for case in CASES]
    want = [(estimate(*o).model_dump(), memory_only(*o).model_dump()) for o in objs]
    errors = []

    def work(seed):
        for i in range(3 * len(objs)):
            j = (seed * 7 + i) % len(objs)
            cluster, model, layout, training, A = objs[j]
            layout = layout.model_copy()
            mem = memory_only(cluster, model, layout, training, A).model_dump()
            est = estimate(cluster, model, layout, training, A).model_dump()
            if (est, mem) != want[j]:
                errors.append(CASES[j][0])

    errors += run_in_threads(work, 8)
    assert not errors
