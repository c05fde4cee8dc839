"""Megatron-Core pipeline layouts that count the input embedding and the loss as layers (issue 29 item 1).

The three layouts the issue names run in NVIDIA's recipes with more model chunks than a rank has
decoder layers, the embedding's first and the loss's last chunk holding no other layer: Llama 3.1 405B
(126 layers) at PP 16 x VPP 8, DeepSeek-V3 (61) at PP 31 x VPP 2, Qwen3-235B (94) at PP 8 x VPP 12.
They are legal with --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split
(Megatron-Core 0.11 and later), and an error naming the release at one without them. Their exports
at both pinned releases are in tests/test_exporters.py and benchmarks/validate_exports.toml.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import advisor
from advisor.costmodel.context import resolve
from advisor.costmodel.memory import chunk_share, chunks_in_flight
from advisor.inputs.layout import Layout
from advisor.inputs.pipeline import PIPELINE_FORMS, pipeline_split, stage_layers
from advisor.inputs.specs import Cluster, Model, Training

# (model, layout, GPUs, what Megatron counts besides the decoder layers)
CASES = [
    ("llama-3.1-405b", dict(tp=8, pp=16, vpp=8, sp=True, recompute="full"), 1024, "embedding-loss"),
    ("deepseek-v3", dict(tp=1, pp=31, vpp=2, ep=64, etp=1, recompute="full"), 1984, "loss"),
    ("qwen3-235b-a22b", dict(tp=2, pp=8, vpp=12, ep=16, etp=1, sp=True, recompute="full"), 256, "embedding-loss"),
]
RULE = {"embedding-loss": "megatron.embedding-and-loss-in-pipeline-split", "loss": "megatron.loss-in-pipeline-split"}


def _audit(name: str, degrees: dict, gpus: int, **stated):
    layout = Layout(framework="megatron", zero_stage=1, **degrees)
    training = Training(seq_len=4096, global_batch_size=gpus // (layout.tp * layout.pp) * layout.pp * 2, **stated)
    return advisor.audit(Cluster(gpu="H100", gpus=gpus), name, layout, training)


def _legality_errors(report) -> list[str]:
    return [f.rule_id for f in report.errors if not f.rule_id.startswith("layout.memory")]


def test_the_issues_layouts_are_legal_with_the_embedding_and_loss_counted():
    for name, degrees, gpus, counted in CASES:
        report = _audit(name, degrees, gpus)
        assert _legality_errors(report) == [], (name, _legality_errors(report))
        finding = next(f for f in report.findings if f.rule_id == RULE[counted])
        chunks = degrees["pp"] * degrees["vpp"]
        # the formula with its values, and the flags that run it
        assert f"= {chunks} = pp({degrees['pp']}) x vpp({degrees['vpp']}) x 1" in finding.message, finding.message
        assert "--account-for-loss-in-pipeline-split --num-layers-per-virtual-pipeline-stage 1" in finding.fix
        assert ("--account-for-embedding-in-pipeline-split" in finding.fix) is (counted == "embedding-loss")
        assert "megatron.virtual-stage-needs-a-layer" not in {f.rule_id for f in report.findings}


def test_a_release_without_the_accounting_flags_refuses_them_and_names_itself():
    for name, degrees, gpus, _ in CASES:
        old = _audit(name, degrees, gpus, framework="megatron-core", framework_version="0.10.0")
        assert _legality_errors(old) == ["megatron.pipeline-split-release"], name
        message = next(f.message for f in old.errors if f.rule_id == "megatron.pipeline-split-release")
        assert "megatron-core 0.10.0 does not have" in message and "--account-for-embedding/loss" in message
        assert not any(f.rule_id in RULE.values() for f in old.findings)      # no "set the flags" beside it
        new = _audit(name, degrees, gpus, framework="megatron-core", framework_version="0.11.0")
        assert _legality_errors(new) == [], name
        before_core = _audit(name, degrees, gpus, framework="megatron-lm", framework_version="2021")
        assert "megatron.pipeline-split-release" in _legality_errors(before_core), name


def test_more_chunks_than_the_embedding_and_loss_can_fill_stay_an_error_with_the_formula():
    report = _audit("deepseek-v3", dict(tp=1, pp=16, vpp=4, ep=64, etp=1, recompute="full"), 1024)
    finding = next(f for f in report.errors if f.rule_id == "megatron.virtual-stage-needs-a-layer")
    assert finding.message.startswith("61 layers over pp(16) x vpp(4) = 64 model chunks: the lightest pipeline "
                                      "rank holds 2 layers"), finding.message
    # the 405B at PP 16 x VPP 9: 144 chunks for 126 + 2
    report = _audit("llama-3.1-405b", dict(tp=8, pp=16, vpp=9, sp=True, recompute="full"), 1024)
    assert "megatron.virtual-stage-needs-a-layer" in _legality_errors(report)


def test_an_uneven_split_no_count_says_gets_the_layout_string_warning_only():
    report = _audit("deepseek-v3", dict(tp=1, pp=16, vpp=2, ep=64, etp=1, recompute="full"), 1024)
    assert _legality_errors(report) == []
    assert "megatron.vpp-divides-stage-layers" in {f.rule_id for f in report.warnings}
    old = _audit("deepseek-v3", dict(tp=1, pp=16, vpp=2, ep=64, etp=1, recompute="full"), 1024,
                 framework="megatron-core", framework_version="0.12.0")
    assert "megatron.pipeline-split-release" in _legality_errors(old)    # the layout string came with 0.13


@settings(max_examples=300, deadline=None)
@given(layers=st.integers(2, 200), pp=st.integers(2, 40), vpp=st.integers(1, 16))
def test_every_split_keeps_the_rank_totals_and_fills_every_chunk(layers, pp, vpp):
    """Megatron-Core's own rule (transformer_block.py get_num_layers_to_build), restated: with `a` of the
    embedding and the loss counted, every chunk builds (L + a) / (pp * vpp) decoder layers, one less in
    the first (embedding) and the last (loss) chunk; nothing else may be empty."""
    split = pipeline_split(layers, pp, vpp) if pp <= layers else None
    if split is None:
        return
    assert split.form in PIPELINE_FORMS and len(split.chunks) == pp * vpp and sum(split.chunks) == layers
    assert list(split.ranks) == stage_layers(layers, pp)
    assert [sum(split.chunks[j * pp + k] for j in range(vpp)) for k in range(pp)] == list(split.ranks)
    assert min(split.chunks[1:-1], default=1) >= 1 and min(split.chunks) >= 0
    if split.form.startswith("account"):
        per = (layers + split.accounted) // (pp * vpp)
        assert (layers + split.accounted) % (pp * vpp) == 0 and per == split.per_chunk
        expected = [per] * (pp * vpp)
        expected[-1] -= 1
        expected[0] -= split.accounted == 2
        assert list(split.chunks) == expected
    if split.form == "even":
        assert set(split.chunks) == {layers // (pp * vpp)}


def test_the_loss_chunk_is_rarely_in_flight():
    """Llama 3.1 405B on PP 16 x VPP 8 holds its activations chunk by chunk: the last rank's last chunk (the
    loss, no decoder layer) has one micro-batch in flight, so the rank holds 7 x 16 layers of activations,
    more than the 113 chunks x 7/8 layers an even split would give; the first rank's embedding chunk
    holds 31 and no layer, so 7 x 16 there too."""
    model, cluster = Model.preset("llama-3.1-405b"), Cluster(gpu="H100", gpus=1024)
    layout = Layout(tp=8, pp=16, vpp=8, dp=8, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=64)
    c = resolve(cluster, model, layout, Training(seq_len=8192, global_batch_size=512))
    last, first = c.pp - 1, 0
    assert chunks_in_flight(c, last) == 113 and chunks_in_flight(c, first) == 143
    assert chunk_share(c, last, 113) * 7 == 112 and chunk_share(c, first, 143) * 7 == 112
    even = Layout(tp=8, pp=16, vpp=1, dp=8, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=64)
    assert chunk_share(resolve(cluster, model, even, Training(seq_len=8192, global_batch_size=512)), 0, 16) is None


def test_the_trace_says_when_the_choice_counts_the_embedding_and_the_loss():
    rec = advisor.recommend(Cluster(gpu="H100", gpus=1024), "llama-3.1-405b",
                            Training(seq_len=8192, global_batch_size=512))
    split = pipeline_split(126, rec.layout.pp, rec.layout.vpp)
    notes = [e.message for e in rec.trace.events if e.op == "note" and "counts the embedding" in e.message]
    assert split.form.startswith("account") and rec.layout.vpp > 1, rec.layout.id
    assert len(notes) == 1 and "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split" \
        in notes[0] and "(7 | 8 x 14 | 7)" in notes[0], notes
    assert not [f for f in rec.findings if f.severity == "error"]
    assert "megatron.embedding-and-loss-in-pipeline-split" in {f.rule_id for f in rec.findings}
