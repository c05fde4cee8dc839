"""The cost model's speed-ups (issue 8) change no result.

`estimate` / `memory_only` cache what depends only on (cluster, model, training) per object triple
(context._static), per-layer activations across calls (memory._acts), and the memory part of a
`memory_only` call for the `estimate` of the same Layout object that follows it (the planner's
pattern). Two kinds of checks:

- frozen: EXPECTED holds, for the cases below, a SHA-256 of `repr(result.model_dump())` (every field,
  floats to the last bit, dict order) and the headline numbers, computed by the implementation
  before the speed-ups (commit b9ce97d). A deliberate change of the cost model changes them:
  regenerate with `python tests/test_estimate_speed_identity.py` and say why in the commit.
- invariance: whatever the caches hold (cold, warm, after memory_only of the same layout, equal but
  not identical inputs, many threads), every result is the same.
"""

from __future__ import annotations

import hashlib
import sys
import threading

import pytest

from advisor import Cluster, Layout, Model, Training
from advisor.estimate import Assumptions, estimate, memory_only

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
     dict(tp=8, pp=7, sp=True, vpp=2, num_microbatches=9), dict(seq_len=4096, global_batch_size=63), None),
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


def digest(result) -> str:
    return hashlib.sha256(repr(result.model_dump()).encode()).hexdigest()


# Generated by the implementation before the speed-ups (commit b9ce97d), see the module docstring:
# id -> (estimate digest, memory_only digest, step_time, memory.total)
EXPECTED = {
    '70b-tp8pp2-zero1': ('8c441da39ae95f1366cd0576a9fa52917db57b97024356130fec884e75d74f52',
        '2ef9f6fc1318516cafc707430f66d29d52a23ac128700bcf3fc3c6eba7ce12ea', 62.964122821951015, 64873254092),
    '70b-tp8pp4-vpp5-sel': ('27868022bf7ca37d585f420685c5c47fca34c255d217243fee42c77a8c223538',
        'b649dfc0d941e5822aae05b5fea9aeadfda964373d2cc1b45cfe6b70252a8a6b', 16.548901192781763, 55952028467),
    '70b-pp3-uneven-full': ('ab9306fa50c864b548cc0ce85c0ea6104612846736a19b58e62ca7ec0ecc86cc',
        '4d33c507b7ae360e86115eedb9a5804e03e94c04c2341270f68e02ae318c0e2c', 7.964978579463402, 39152169779),
    '70b-pp7-mid-heavier': ('13156b92fccc4d3672e60a063260a6d1f79eb08244c9b912949d7dc5867e36ea',
        '81f1dd762b152e8e39aab4d1d4278fdbaf13f938affbed44769b8626ccec57cf', 0.8507738390475628, 40431779840),
    '405b-128k-cp16': ('f1c340e92b2469212003074851f6da14b89883e59b2781c7c7e378d52332cea8',
        '4594bd33228001ee30a7e444573eb240023bf45003121d440bd436d593669f72', 12.21414104743555, 92840209612),
    'gpt3-175b-nonflash': ('1287f22de2a27e609d0800e297492e94f300c49617e6d9fd9f2ac1a82bdbfb07',
        '8705cd011f427b5877469855ed5a30bc76d9e63b36089e1f9451302536d146af', 21.80689407817107, 23310541926),
    'gpt3-fp16-zero0': ('f2fc31e3892830c2f2535353f4f9f2d0a3b8cddac33759e5a5aad4a8a6c9f07a',
        '9e0879e5941eb15faa507c911dc0da6e52667fde86efd69aa1f09e780dbeacde', 27.756132172776415, 63580871065),
    'bloom-ds-zero1-pp': ('58b5874ca6ecc82d1cbcb8232bf548db9f7277be09378d46517fe8dbe526a0e3',
        '055ff9f6f63ebe26cfab03925e66bb4452dbb08f3eb60f4669a7dae2d1e2fbc9', 65.75000696296287, 54940390835),
    'deepseek-v3-ep': ('ba1371a90e95907107adbdcc69677642f97db82b33be558796fb987f811051db',
        '0ad157a92b20948d9752379e848611477adc27db4841c4bfe0e6cc376031c0d0', 26.411782093843673, 14546162534),
    'deepseek-v3-etp': ('1cb72a6e6debb9bd6005cc931c72dd60604c99036c23b4d8596ec5644bfe31df',
        '98198e5fc1d7684b1f8942a25df2604e56c2338210fdd00f3da0aa8e2da93996', 14.388130150153358, 104546178159),
    'mixtral-ep8': ('17b8f765b61ab06e18e953dde275ab55c3671ce19c22d123cfe0a9d31b7dac22',
        'cae8f3a1b3fe272b5fc836ed1b3904fa40abb602ddcd92ef482f3c59fd68fea5', 6.872708890402294, 52426704384),
    '70b-ds-zero3-offload-cpu': ('d406b959d04aafe3cbc81dcaa6d50aa60fb43178c380c7c79e16361586beb065',
        '4c6a0b23f1cb9973d151a3d66ff5c67bfac32c1d643eefbb1c5ba3de16d1da3f', 118.68322265141515, 10094203699),
    '70b-ds-zero3-offload-nvme': ('0f10a9583c6028ea1e52f2d7d3619a6eff4ecdeb65178f02d3104cffaabe9781',
        '04abb6acf5bb59354cc3d1296934a93ec47b7bd90c8b4546cbb62fc72bf55458', 199.61582319669515, 27338365747),
    '7b-ds-zero2': ('af3ce6e13cd1508df0d3e5d85c28dfa67748149336d08ada0d02512d6ac49185',
        'b0b9981a76e9630b711eb74ec82bea88afa64f4e3769f921c6cc415d70e99ede', 15.548940543978759, 68942616601),
    '7b-ds-ulysses-cp': ('77f0af2efb92a78fd2f977175e1f7b5ef3b6b9c06f9323ccdf597f83162bd28a',
        '0c4fed6b6263c6fd2f466ba2e13af7a752902c5d1601f5a86883c77d7d4d4f94', 13.262078393665961, 74130646041),
    '8b-torchtitan-fsdp2': ('ec34e71b759d30fb69fd30c818e13db91e94ac83007d471336d4e646b666d97f',
        '7a1b983612dd58aedbb8399baee1bbd2f5b9b26990e4a3b3041b31796efe29b3', 3.4885429705878295, 41284924620),
    '8b-torchtitan-fsdp3-offload': ('5925616c960d64317a3fb3179dfadc10ff5547abba06465d14dcfcb9758142a6',
        '65b0bd36d70115dc9dbb3ba98588370232690d18adad65faec3e235d4a18b00b', 3.8972016536694873, 50175719219),
    '70b-megatron-fsdp': ('2adde17bb8f80efd5a9f178d9482d2f0c3a8a26846ff92ef15b10fdd79a0a116',
        '03b3859516abd33c6dc77539e5a35ebd5dbb4b5b8b50dacd92db37abead865b2', 57.09072017907025, 71371704934),
    '70b-fp8-tpoverlap': ('d685b61b7db4d8dc7c5025750784b34eadf4dcc919a01c3bd76ae32b3d6e915f',
        '7ac48f6357e8216f10ccaf7fdf0a599071a6ca6580e89b7207c60d68d2427e0c', 18.196401879490892, 44565063270),
    'falcon-40b-gelu': ('e6c1677ec664726c0663d1ba6380a61ae203f8a6d33cf4b03920a158c1fdbeb8',
        '0b77826567c99d8f78b682ca160c48368a3ab6520979d69f0928304653956303', 21.249748271077795, 25506606284),
    'mixtral-8x22b-gb200': ('d1fe732c3d798698129ce0358610090dc8c2aa380248f89fb8cc23a719d16799',
        '2717c1ad705912590508a981dcea5949734a4e833856bb3aca86c5d9fd0358a5', 3.431179484730368, 146731781324),
    'qwen-72b-mi300x-cp': ('30355c2c4710ebd69a975ea3fbac0c3271cde1e1765b961d3361dd47e2d2fa83',
        'e816260c6043a402c7c259812526f0f1aaa042bc7dfad040b0164349012cac1f', 166.2033306783629, 115365953536),
    '13b-v100-half-node': ('99ef20992550f4f9676fb8c036f52f173e384c9bd04f21f12731716b8762973b',
        '89ce20744897e312ca07532a2ead78f958678af59eea445c04bdf6d22983f3cb', 26.57651645144289, 10096625356),
    '7b-custom-network': ('1d3915f9ad631c66294d44fd2ef54cecd681ba0c8f5fe85f47703980688de1c0',
        'a81c9a74c8a188bc36159c55d594a31ebc54f40db5b0d6c1c340509222dbf803', 1.5456668609403215, 25651560448),
}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_results_match_the_implementation_before_the_speed_ups(case):
    cluster, model, layout, training, A = case_objects(case)
    want_est, want_mem, step, total = EXPECTED[case[0]]
    est = estimate(cluster, model, layout, training, A)
    mem = memory_only(cluster, model, layout, training, A)
    assert (est.step_time, est.memory.total) == (step, total)
    assert digest(est) == want_est and digest(mem) == want_mem
    # the planner's pattern: memory_only, then estimate of the same Layout object (cached memory part)
    layout2 = layout.model_copy()
    assert digest(memory_only(cluster, model, layout2, training, A)) == want_mem
    assert digest(estimate(cluster, model, layout2, training, A)) == want_est


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
        try:
            for i in range(3 * len(objs)):
                j = (seed * 7 + i) % len(objs)
                cluster, model, layout, training, A = objs[j]
                layout = layout.model_copy()
                mem = memory_only(cluster, model, layout, training, A).model_dump()
                est = estimate(cluster, model, layout, training, A).model_dump()
                if (est, mem) != want[j]:
                    errors.append(CASES[j][0])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


if __name__ == "__main__":  # regenerate EXPECTED (prints it; paste it above)
    print("EXPECTED = {")
    for case in CASES:
        cluster, model, layout, training, A = case_objects(case)
        est = estimate(cluster, model, layout, training, A)
        mem = memory_only(cluster, model, layout, training, A)
        print(f"    {case[0]!r}: ({digest(est)!r},\n        {digest(mem)!r}, {est.step_time!r}, {est.memory.total!r}),")
    print("}")
    sys.exit(0)
