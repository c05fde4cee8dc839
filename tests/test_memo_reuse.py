"""The cost model's memo is shared by equal inputs built anew (costmodel.context._static): a call
that finds it warm answers exactly what a cold call answers, and inputs that differ in any value
never share it."""

from __future__ import annotations

import advisor
from advisor import Cluster, Training
from advisor.costmodel.context import clear_memos


def _answer(cluster, model, training) -> str:
    return advisor.recommend(cluster, model, training).model_dump_json()


def _cold(cluster, model, training) -> str:
    clear_memos()
    return _answer(cluster, model, training)


def test_a_warm_memo_answers_what_a_cold_one_does():
    cluster, training = Cluster(gpu="H100-SXM-80GB", gpus=64), Training(seq_len=8192, global_batch_size=512)
    cold = _cold(cluster, "llama-3-70b", training)
    # a new Cluster and Training of the same values, and the preset's name resolved again: warm
    warm = _answer(Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b", Training(seq_len=8192, global_batch_size=512))
    assert warm == cold


def test_inputs_that_differ_by_one_value_do_not_share_a_memo():
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=64)
    _answer(cluster, "llama-3-70b", Training(seq_len=8192, global_batch_size=512))   # warms 512's memo
    warm_other = _answer(cluster, "llama-3-70b", Training(seq_len=8192, global_batch_size=1024))
    assert warm_other == _cold(cluster, "llama-3-70b", Training(seq_len=8192, global_batch_size=1024))
    # and a different GPU count, which the memo's terms (the DP degree) depend on through the cluster
    more = Cluster(gpu="H100-SXM-80GB", gpus=128)
    _answer(cluster, "llama-3-70b", Training(seq_len=8192, global_batch_size=512))
    assert _answer(more, "llama-3-70b", Training(seq_len=8192, global_batch_size=512)) == \
        _cold(more, "llama-3-70b", Training(seq_len=8192, global_batch_size=512))


def test_estimates_of_a_sequence_of_inputs_do_not_depend_on_what_ran_before():
    """Each estimate in a mixed sequence equals the same estimate computed cold."""
    layout = advisor.Layout(tp=8, pp=2, dp=4, sp=True, zero_stage=1)
    cases = [(Cluster(gpu=gpu, gpus=64), model, Training(seq_len=seq, global_batch_size=256))
             for gpu in ("H100-SXM-80GB", "A100-80GB") for model in ("llama-3-70b", "llama-2-70b")
             for seq in (4096, 8192)]
    warm = [advisor.estimate(*case[:2], layout, case[2]).model_dump_json() for case in cases]
    cold = []
    for case in cases:
        clear_memos()
        cold.append(advisor.estimate(*case[:2], layout, case[2]).model_dump_json())
    assert warm == cold
