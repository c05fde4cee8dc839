"""The global batch when none is given (inputs.batch, issue 32 item 4): chosen for the cluster within the
published 4M-16M tokens, split by the data-parallel degrees the GPU count allows, and stated in the trace."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import advisor
from advisor.inputs.batch import DEFAULT_BATCH_TOKENS, DEFAULT_MAX_BATCH_TOKENS, default_batch


@pytest.mark.parametrize("gpus, seq, sequences", [
    (8, 4096, 1024),        # 4M tokens, which 8 GPUs split
    (64, 8192, 512),        # 4M tokens, which 64 GPUs split
    (40, 8192, 520),        # 512 would allow dp 1, 2, 4, 8 only: the next multiple of 40
    (2048, 4096, 2048),     # a sequence per GPU: 8M tokens
    (16384, 8192, 2048),    # 16M tokens, Llama 3 405B's batch on 16,384 H100s
    (16384, 4096, 4096),    # at most 16M tokens: a multiple of 4,096, not of 16,384
])
def test_published_range_and_the_cluster_decide_the_batch(gpus, seq, sequences):
    assert default_batch(gpus, seq).sequences == sequences


@given(gpus=st.integers(1, 1 << 20), seq=st.sampled_from([512, 2048, 4096, 8192, 32768, 131072, 1 << 20]))
def test_the_default_batch_stays_in_the_published_range(gpus, seq):
    batch = default_batch(gpus, seq).sequences
    lo = max(1, round(DEFAULT_BATCH_TOKENS / seq))
    assert lo <= batch <= max(lo, DEFAULT_MAX_BATCH_TOKENS // seq)


@given(gpus=st.integers(1, 1 << 14), seq=st.sampled_from([2048, 4096, 8192, 32768]), mbs=st.integers(1, 16))
def test_a_stated_micro_batch_divides_each_ranks_share_of_the_default_batch(gpus, seq, mbs):
    """With a stated micro-batch, the default batch is a multiple of it times the divisor it names, so
    every data-parallel degree dividing that divisor runs whole micro-batches; within the published range
    where a multiple fits it."""
    chosen = default_batch(gpus, seq, mbs)
    assert chosen.sequences % (mbs * chosen.divides) == 0 and gpus % chosen.divides == 0
    lo = max(1, round(DEFAULT_BATCH_TOKENS / seq))
    hi = max(lo, DEFAULT_MAX_BATCH_TOKENS // seq)
    assert lo <= chosen.sequences and (chosen.sequences <= hi or -(-lo // mbs) * mbs > hi)
    assert default_batch(gpus, seq, 1) == default_batch(gpus, seq)     # no stated micro-batch: as before


def test_a_stated_micro_batch_that_splits_no_default_batch_gets_one_that_it_splits():
    """mbs 7 on 8 GPUs: 512 sequences split into no whole micro-batches of 7 (no recommendation at all);
    the default is now 560, 7 x 8 x 10, and the note says why."""
    rec = advisor.recommend(advisor.Cluster(gpu="H100", gpus=8), "llama-3-8b", {"micro_batch_size": 7})
    assert rec.status == "recommended" and rec.training.global_batch_size == 560
    note = next(e.message for e in rec.trace.events if "global_batch_size not given" in e.message)
    assert note.endswith("times the micro-batch of 7")


def test_8b_on_40_gpus_is_not_forced_into_a_pipeline():
    """512 sequences (4M tokens of 8k) split over dp 1, 2, 4 or 8 only, which left pipeline stages of 5;
    the chosen 520 splits over 40."""
    rec = advisor.recommend(advisor.Cluster(gpu="H100", gpus=40), "llama-3-8b")
    assert rec.layout.pp == 1
    note = next(e.message for e in rec.trace.events if "global_batch_size not given" in e.message)
    assert "520 sequences" in note and "every data-parallel degree of 40 GPUs" in note


def test_a_given_batch_is_kept_and_fine_tuning_keeps_its_own():
    given = advisor.recommend(advisor.Cluster(gpu="H100", gpus=40), "llama-3-8b",
                              advisor.Training(seq_len=8192, global_batch_size=512))
    assert not any("global_batch_size not given" in e.message for e in given.trace.events)
    lora = advisor.recommend(advisor.Cluster(gpu="H100", gpus=40), "llama-3-8b", advisor.Training(task="lora"))
    assert any("128 sequences for lora" in e.message for e in lora.trace.events)


def _advice(cluster, model, training):
    rec = advisor.recommend(cluster, model, training)
    return [f for f in advisor.audit(cluster, model, rec.layout, training).findings
            if f.rule_id == "advice.batch-limits-data-parallel"]


def test_a_given_batch_that_forces_a_pipeline_says_which_batch_would_not():
    found = _advice(advisor.Cluster(gpu="H100", gpus=40), "llama-3-8b", advisor.Training(seq_len=8192, global_batch_size=512))
    assert len(found) == 1
    assert "at most 8 data-parallel replicas of 40 GPUs" in found[0].message and "520 sequences" in found[0].fix


@pytest.mark.parametrize("gpus, model, seq, batch", [
    (1024, "gpt-3-175b", 2048, 1536),     # the forced factor 2 goes to tensor parallelism inside the node
    (40, "llama-3-8b", 8192, 520),        # a batch 40 GPUs split
])
def test_no_batch_advice_where_the_batch_forces_nothing_the_model_does_not_need(gpus, model, seq, batch):
    gpu = "A100-80GB" if gpus == 1024 else "H100"
    assert not _advice(advisor.Cluster(gpu=gpu, gpus=gpus), model, advisor.Training(seq_len=seq, global_batch_size=batch))
