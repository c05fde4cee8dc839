"""Estimated vs reported throughput over every dev file, by GPU generation x dense/MoE x precision.

    python benchmarks/calibrate_2025.py [--verbose] [--perf PATH] [--layouts PATH]
    python benchmarks/calibrate_2025.py --scan ep_a2a_overlap_efficiency=0,0.3,0.6,0.9

MEASUREMENT, and the scans that choose constants (issue 16, item 7): nothing is fitted per record;
the cost model runs with `Assumptions()` plus what each record's source states (`rec.assumptions`
from benchmarks/published.py). `--scan NAME=V1,V2,...` prints the targets at each value of one
Assumptions field over every record at once, and the "setting pairs" (records that differ only in a
stated setting) whose measured ratio prices that setting alone.

Inputs (both through `benchmarks.published.load_records`, with every filled-in value listed as an
"assumed:" line under the record in --verbose):
- ../shared/data/published-perf-2025-dev.jsonl: 45 rows of NVIDIA's Megatron-Bridge performance
  tables (NeMo 25.09 / 25.11 containers) on H100, B200, GB200, GB300, BF16 / FP8-CS / MXFP8, dense
  (Llama 3) and MoE (DeepSeek-V3, Qwen3, GPT-OSS). `reported.tflops_per_gpu` is the page's "Model
  TFLOP/sec/GPU".
- ../shared/data/published-layouts-dev.jsonl: the rows that report a throughput, each turned into a
  measured step time with its own source's FLOP convention by benchmarks/calibrate_throughput.py
  (`measured_step`; the rows it does not calibrate on are shown, not scored, as there).

How benchmarks/published.py reads the 2025 file (mappings added for it; the older file loads exactly
as before): "NVIDIA GB300" / "B300" name their presets (they fell through to H100 before); GB200 /
GB300 keep the NVL72 72-GPU NVLink domain when a record gives 4 GPUs per node; a Megatron-Bridge row
with the FSDP column set is Megatron-FSDP fully sharded (framework "megatron", zero_stage 3, as the
performance scripts' "optim_grads_params"), otherwise Megatron-Core with the distributed optimizer;
MoE rows with TP > 1 get expert TP 1 (the workloads' base configs; without it the Qwen3-235B rows
with TP 2 are invalid layouts); the 25.09 rows' unstated precision is FP8 (that table's footnote);
GPT-OSS is a gated RMSNorm/RoPE family with head_dim 64 (it was read as GPT-2-style). What the
table rows do not state but Megatron-Bridge's performance configs set (recompute modules, activation
offload, token dispatcher and backend, A2A overlap, TP-comm overlap, SP, the FP8 recipe and FP8
parameters) comes from benchmarks/mbridge_recipes_2025.json, read from Megatron-Bridge's source at
the release tags (benchmarks/mbridge_recipes.py); each record's "assumed:" lines name what was taken
and what the cost model cannot represent (partial full recompute, CUDA graphs, MTP layers).

What is compared, per record (ratio = estimated / reported throughput, > 1 = estimate too fast):
- 2025 rows: the estimated Model TFLOP/s per GPU counted as Megatron-Bridge counts it, F_mb / estimated
  step time / GPUs, against the reported figure. F_mb is `num_floating_point_operations` of
  github:NVIDIA-NeMo/Megatron-Bridge@7af9601c9da746d21481194356295bfe23df3737 (tag v0.2.0, the 25.11
  container's release; the transformer path is the same in v0.1.0rc4, 6725f7049504c3bcf9a65c5aee40aa118bc7a869)
  src/megatron/bridge/training/utils/flop_utils.py `transformer_flops`:
    per token: 12 L h^2 [ (1 + g/a + s/(2h)) q/h ]          attention, GQA ("Only half of the attention
                                                              matrix is non-zero": causal counted HALF)
               (MLA: 6 L (q, kv LoRA and o projections + s/2 x a (d_qk + d_v)), also causal half)
             + 12 L h [ f x gate x dense share + f_moe x topk x gate x MoE share + f_shared x gate x MoE share ]
             + 6 h V_pad (1 + mtp)  (+ the MTP layers as extra MoE layers, and their norms and projection)
  gate = 3/2 only for a gated unit with F.silu (SwiGLU); GPT-OSS's quick-GeLU GLU counts 1, so the
  page undercounts its MLP by a third; V_pad = vocab rounded up to 128 x TP (make_vocab_size_divisible_by);
  the MTP depth is 1 for DeepSeek-V3 unless the row says "w/o MTP" (`_mtp_layers`). Checked per record where
  the row also gives tokens/s/GPU: F_mb per token / (reported TFLOP/s / reported tokens/s) is the
  "conv" column (1.000 = the page counts exactly this).
  advisor's own `Estimate.model_flops` (advisor/costmodel/flops.py `model_flops_per_step`) counts
  attention at FULL s^2 (no causal halving) over the unpadded vocabulary, so `Estimate.mfu` is not
  the page's convention; it is printed (MFU at the dense 16-bit peak) but not compared.
- older rows: measured step time / estimated step time (calibrate_throughput's conventions).
- whether the estimate judges the published layout to fit (`est.memory.fits`), and the terms of the
  estimated step: compute, pipeline bubble, exposed communication (with its largest dimension) and
  optimizer, as shares of the step, so the error can be traced to a term.

Conventions of the summary:
- generation: Volta V100; Ampere A100; Hopper H100/H800/H200; Blackwell B200/B300/GB200/GB300.
- precision as the record states it: bf16, fp16, fp8-cs (current scaling), mxfp8, fp8 (any other
  fp8 wording; the 25.09 rows state none, see benchmarks/published.py `_FP8_UNSTATED_SOURCES`; their
  configs run FP8-CS), "16-bit" where an old record does not say which. The estimate runs the
  recipe the record or its config names (advisor.inputs.precision).
- statistics over unique configurations: a row repeating another's GPU, model, layout, batch,
  precision and reported figure (the 25.11 table appears in the data twice, from two pages) counts
  once; the line "all rows" counts every row.
- mean |log| = mean |ln(est/reported)|; within x% = |est/reported - 1| <= x.
- targets (issue 16, "Done when"), on the 2025 file: >= 85% within 15% and mean |log| <= 0.10; MoE >= 80%
  within 20%; every layout judged to fit. On the older file: mean |log| <= 0.07.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # calibrate_throughput needs it

from advisor.costmodel import Assumptions, estimate
from benchmarks.calibrate_throughput import measured_step, run_assumptions
from benchmarks.published import default_path, layout_label, load_records

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
PERF_2025 = DATA / "published-perf-2025-dev.jsonl"

GENERATION = {"V100": "Volta", "A100": "Ampere", "H100": "Hopper", "H800": "Hopper", "H200": "Hopper",
              "B200": "Blackwell", "B300": "Blackwell", "GB200": "Blackwell", "GB300": "Blackwell",
              "MI300X": "CDNA3"}
THROUGHPUT_KEYS = ("mfu", "tflops_per_gpu", "tokens_per_sec_per_gpu")
_TOKENS_IN_NOTES = re.compile(r"([\d,]+(?:\.\d+)?) tokens/s/GPU")


# ----------------------------------------------------------------------------- labels

def generation(rec) -> str:
    name = rec.cluster.gpu.name.upper()
    for key in ("GB300", "GB200", "B300", "B200", "H800", "H200", "H100", "A100", "V100", "MI300X"):
        if key in name:
            return GENERATION[key]
    return "other"


def precision_label(rec) -> str:
    """The precision as the record states it (the row label; published.py passes the recipe)."""
    s = (rec.raw["training"].get("precision") or "").lower()
    if "mx" in s:
        return "mxfp8"
    if "fp8" in s:
        return "fp8-cs" if ("-cs" in s or "current" in s) else "fp8"
    if "bf16" in s:
        return "bf16"
    if "fp16" in s:
        return "fp16"
    if rec.id.startswith("mb-perf-25.09-"):
        return "fp8"          # published.py: the 25.09 table's footnote
    if "16-bit" in s or "mixed" in s:
        return "16-bit"
    return rec.training.precision


def kind(rec) -> str:
    return "MoE" if rec.model.experts > 1 else "dense"


def script_assumptions(rec) -> list[str]:
    """What this script reads into a 2025 record beyond the loader (printed as "assumed:")."""
    out = []
    if _mtp_layers(rec):
        out.append("1 MTP layer (DeepSeek-V3 recipe default) counted in F_mb as the page does; the estimate "
                   "has no MTP layer (its time and memory are missing)")
    if "gpt-oss" in (rec.model.name or "").lower():
        out.append("GPT-OSS: half the layers attend a 128-token window in the estimate; F_mb counts them as "
                   "full causal attention, as the page does")
    if "tokendrop" in (rec.raw.get("notes") or "").lower():
        out.append("'(tokendrop)' variant estimated as dropless with balanced routing (moe_load_imbalance default)")
    return out


# ----------------------------------------------------------------------------- Megatron-Bridge FLOPs

def _mtp_layers(rec) -> int:
    """MTP depth the page's FLOP count includes: 0 where the table labels the row "w/o MTP", else 1
    for DeepSeek-V3, whose Megatron-Bridge recipe defaults to mtp_num_layers=1
    (src/megatron/bridge/recipes/deepseek/deepseek_v3.py at v0.1.0rc4 and v0.2.0; the 25.09 rows carry
    no MTP label); no other model here has MTP. The "conv" column confirms each choice."""
    if "deepseek-v3" not in (rec.model.name or "").lower():
        return 0
    return 0 if "w/o MTP" in (rec.raw.get("notes") or "") + (rec.raw.get("source") or "") else 1


def mbridge_flops(rec) -> float:
    """Megatron-Bridge v0.2.0 `num_floating_point_operations` (flop_utils.py, transformer_flops) for
    one global batch: causal attention counted as half of s^2, padded vocabulary, MTP layers."""
    m, t = rec.model, rec.training
    B, s, h, a = t.global_batch_size, t.seq_len, m.hidden, m.heads
    name = (m.name or "").lower()
    gate = 1.5 if (m.activation == "swiglu" and "gpt-oss" not in name) else 1.0   # F.silu GLU only
    mtp = _mtp_layers(rec)
    moe = m.experts > 1
    n_moe = (m.layers - m.dense_layers) if moe else 0
    n_dense = m.layers - n_moe
    L = m.layers + mtp
    if moe:
        n_moe += mtp              # the last layer is MoE for every MoE model here
    else:
        n_dense += mtp
    f = m.ffn_hidden
    f_moe = m.moe_ffn_hidden or f
    f_shared = (m.shared_experts * f_moe) if moe else 0
    topk = m.experts_per_token if moe else 0
    if m.mla is not None:
        q = m.mla
        dqk = q.qk_nope_head_dim + q.qk_rope_head_dim
        q_term = q.q_lora_rank * (h + a * dqk + 1) if q.q_lora_rank else h * a * dqk
        attn = 6.0 * L * (q_term + q.kv_lora_rank * (h + a * (q.qk_nope_head_dim + q.v_head_dim) + 1)
                          + h * q.qk_rope_head_dim + a * q.v_head_dim * h
                          + s * a * dqk / 2 + s * a * q.v_head_dim / 2)
    else:
        g = m.kv_heads or a
        qproj = (m.head_dim or h // a) * a
        attn = 12.0 * L * h * h * (1 + g / a + s / h / 2) * qproj / h
    mult = 128 * rec.layout.tp
    vpad = -(-m.vocab // mult) * mult
    mlp = 12.0 * L * h * (f * gate * n_dense / L + f_moe * topk * gate * n_moe / L + f_shared * gate * n_moe / L)
    mtp_extra = 6.0 * mtp * (3 * h + 2 * h * h)
    logits = 6.0 * h * vpad * (mtp + 1)
    return B * s * (mlp + attn + mtp_extra + logits)


def reported_tokens(rec) -> float | None:
    rep = rec.raw.get("reported") or {}
    tok = rep.get("tokens_per_sec_per_gpu")
    if tok:
        return float(tok)
    hit = _TOKENS_IN_NOTES.search(rec.raw.get("notes") or "")
    return float(hit.group(1).replace(",", "")) if hit else None


# ----------------------------------------------------------------------------- rows

def _terms(e) -> dict:
    st = e.step_time
    dims = {k: getattr(e.comm, k).exposed_seconds for k in ("tp", "pp", "dp", "cp", "ep")}
    top = max(dims, key=dims.get)
    return {"compute": e.compute_time / st, "bubble": e.bubble_time / st, "exposed": e.exposed_comm_time / st,
            "optimizer": e.optimizer_time / st, "top_comm": top if dims[top] > 0 else "-",
            "top_comm_share": dims[top] / st}


def rows_2025(path: Path, A_base: Assumptions):
    rows, skipped = [], []
    for rec in load_records(path, include_skipped=True):
        if not rec.ok:
            skipped.append((rec.id, rec.skip_reason))
            continue
        tf = (rec.raw.get("reported") or {}).get("tflops_per_gpu")
        if not tf:
            skipped.append((rec.id, "no reported tflops_per_gpu"))
            continue
        try:
            e = estimate(rec.cluster, rec.model, rec.layout, rec.training, run_assumptions(rec, A_base))
        except Exception as exc:  # noqa: BLE001 - listed with the reason, never dropped silently
            skipped.append((rec.id, f"estimate failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"))
            continue
        world = rec.cluster.gpus
        F = mbridge_flops(rec)
        est_tf = F / e.step_time / world / 1e12
        tok = reported_tokens(rec)
        conv = (F / (rec.training.global_batch_size * rec.training.seq_len)) / (tf * 1e12 / tok) if tok else None
        rows.append(dict(rec=rec, est=e, file="2025", ratio=est_tf / tf, reported=f"{tf:g} TF/s", est_fig=f"{est_tf:.0f}",
                         conv=conv, use=True, gen=generation(rec), kind=kind(rec), prec=precision_label(rec),
                         fits=e.memory.fits, extra=script_assumptions(rec), **_terms(e)))
    return rows, skipped


def rows_layouts(path: Path, A_base: Assumptions):
    rows, skipped = [], []
    for rec in load_records(path, include_skipped=True):
        rep = rec.raw.get("reported") or {}
        if not any(rep.get(k) for k in THROUGHPUT_KEYS):
            continue              # reports no throughput: not part of this benchmark
        if not rec.ok:
            skipped.append((rec.id, rec.skip_reason))
            continue
        try:
            e = estimate(rec.cluster, rec.model, rec.layout, rec.training, run_assumptions(rec, A_base))
        except Exception as exc:  # noqa: BLE001
            skipped.append((rec.id, f"estimate failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"))
            continue
        ms = measured_step(rec)
        if ms is None:
            tf = rep.get("tflops_per_gpu")
            meas, how, use = e.model_flops / (tf * 1e12 * rec.cluster.gpus), f"{tf:g} TF/s (convention unknown)", False
        else:
            meas, how, use = ms
        rows.append(dict(rec=rec, est=e, file="layouts", ratio=meas / e.step_time, reported=how,
                         est_fig=f"{e.step_time:.3g}s vs {meas:.3g}s", conv=None, use=use, gen=generation(rec),
                         kind=kind(rec), prec=precision_label(rec), fits=e.memory.fits, extra=[], **_terms(e)))
    return rows, skipped


def unique(rows):
    seen, out = set(), []
    for r in rows:
        rec = r["rec"]
        L, t, m = rec.layout, rec.training, rec.model
        key = (r["file"], rec.cluster.gpu.name, rec.cluster.gpus, m.layers, m.hidden, m.experts, L.tp, L.pp, L.cp, L.ep,
               L.vpp, L.zero_stage, L.micro_batch_size, t.global_batch_size, t.seq_len, r["prec"], r["reported"])
        if key in seen:
            continue
        seen.add(key)
        out.append(r)
    return out


# ----------------------------------------------------------------------------- printing

def _within(rs, p: float) -> float:
    """Share of rows whose est/reported ratio is within p of 1."""
    return sum(abs(r["ratio"] - 1) <= p for r in rs) / len(rs) if rs else float("nan")


def _mean_log(rs) -> float:
    return statistics.fmean(abs(math.log(r["ratio"])) for r in rs) if rs else float("nan")


def _stats(rs) -> str:
    if not rs:
        return "   0"
    fit = sum(r["fits"] for r in rs) / len(rs)
    return (f"{len(rs):4d}  {statistics.median(r['ratio'] for r in rs):6.3f}  {_mean_log(rs):6.3f}  "
            + "  ".join(f"{_within(rs, p):5.0%}" for p in (0.10, 0.15, 0.20, 0.25)) + f"  {fit:5.0%}")


_HEAD = (f"{'':<36} {'n':>4}  {'median':>6}  {'|log|':>6}  {'<=10%':>5}  {'<=15%':>5}  {'<=20%':>5}  "
         f"{'<=25%':>5}  {'fits':>5}")
_GEN_ORDER = {"Volta": 0, "Ampere": 1, "Hopper": 2, "Blackwell": 3}
_PREC_ORDER = {"bf16": 0, "fp16": 1, "16-bit": 2, "fp8": 3, "fp8-cs": 4, "mxfp8": 5}


def print_summary(rows, title: str, all_rows=None):
    print(f"{title}  (est/reported throughput; unique configurations)")
    print(_HEAD)
    groups = defaultdict(list)
    for r in rows:
        groups[(r["gen"], r["kind"], r["prec"])].append(r)
    for key in sorted(groups, key=lambda k: (_GEN_ORDER.get(k[0], 9), k[1], _PREC_ORDER.get(k[2], 9))):
        print(f"  {' x '.join(key):<34} {_stats(groups[key])}")
    by = defaultdict(list)
    for r in rows:
        by[r["gen"]].append(r)
    for g in sorted(by, key=lambda k: _GEN_ORDER.get(k, 9)):
        print(f"  {g + ' (all)':<34} {_stats(by[g])}")
    by = defaultdict(list)
    for r in rows:
        by[r["kind"]].append(r)
    for k in sorted(by):
        print(f"  {k + ' (all)':<34} {_stats(by[k])}")
    by = defaultdict(list)
    for r in rows:
        if r["kind"] == "MoE":
            # the token dispatcher the estimate was given (the record's settings, benchmarks/mbridge_recipes.py)
            by[(r["gen"], r["est"].assumptions.moe_token_dispatcher)].append(r)
    for g, d in sorted(by, key=lambda k: (_GEN_ORDER.get(k[0], 9), k[1])):
        print(f"  {f'{g} MoE, {d} dispatch':<34} {_stats(by[g, d])}")
    print(f"  {'overall':<34} {_stats(rows)}")
    if all_rows is not None and len(all_rows) != len(rows):
        print(f"  {'overall, all rows (with repeats)':<34} {_stats(all_rows)}")


def print_targets(rows_new, rows_old):
    moe = [r for r in rows_new if r["kind"] == "MoE"]
    fit = sum(r["fits"] for r in rows_new)
    print("issue 16 targets (2025 file unless named; unique configurations):")
    print(f"  within 15%                 {_within(rows_new, 0.15):5.0%}   target >= 85%")
    print(f"  mean |log(est/reported)|   {_mean_log(rows_new):5.3f}   target <= 0.10")
    print(f"  MoE within 20%             {_within(moe, 0.20):5.0%}   target >= 80%  (n = {len(moe)})")
    print(f"  layouts judged to fit      {fit}/{len(rows_new)}   target all")
    print(f"  older file mean |log|      {_mean_log(rows_old):5.3f}   target <= 0.07  (calibrated rows, n = {len(rows_old)})")


def print_records(rows):
    print(f"{'record':<58} {'gpu':<6} {'gpus':>5} {'layout':<26} {'reported':<26} {'est':>17} {'ratio':>6} {'conv':>6} "
          f"{'fits':>4} {'mem/cap':>8}  compute bubble exposed(top) optim   MFU*")
    for r in rows:
        rec, e = r["rec"], r["est"]
        lay = layout_label(rec.layout, ep=True)
        conv = f"{r['conv']:.3f}" if r["conv"] is not None else "-"
        mem = e.memory
        flag = "" if r["use"] else "  (shown, not scored)"
        print(f"{rec.id[:58]:<58} {rec.cluster.gpu.name[:6]:<6} {rec.cluster.gpus:>5} {lay[:26]:<26} "
              f"{r['reported'][:26]:<26} {r['est_fig'][:17]:>17} {r['ratio']:6.3f} {conv:>6} {'yes' if r['fits'] else 'NO':>4} "
              f"{mem.total / mem.capacity:8.2f}  {r['compute']:6.1%} {r['bubble']:6.1%} {r['exposed']:6.1%}({r['top_comm']:>2}) "
              f"{r['optimizer']:5.1%}  {e.mfu:5.3f}{flag}")
        for a in list(rec.assumed) + r["extra"]:
            print(f"      assumed: {a}")


def print_skipped(skipped, title):
    print(f"{title}: {len(skipped)} record(s) not built")
    for rid, why in skipped:
        print(f"  {rid}: {why}")


def setting_pairs(rows) -> list[tuple]:
    """Records of one model on one cluster with one layout, batch and precision that differ only in
    the settings their configs state (rec.assumptions): the measured throughput ratio of such a
    pair isolates those settings, so it checks the cost model's price of them whatever its absolute
    error. Returns (record a, record b, what differs, measured b/a, estimated b/a)."""
    groups = defaultdict(list)
    for r in rows:
        rec = r["rec"]
        t = rec.training
        groups[(rec.cluster.gpu.name, rec.cluster.gpus, rec.model.name, rec.layout.id, t.global_batch_size,
                t.seq_len, t.precision)].append(r)
    out = []
    for group in groups.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                ka, kb = a["rec"].assumptions, b["rec"].assumptions
                diff = sorted(k for k in set(ka) | set(kb) if ka.get(k) != kb.get(k))
                if not diff:
                    continue
                ea, eb = a["est"], b["est"]
                est = (eb.tokens_per_second / ea.tokens_per_second)
                meas = b["ratio"] and (est / (b["ratio"] / a["ratio"]))
                out.append((a["rec"].id, b["rec"].id, diff, meas, est))
    return out


# Issue 16's small-problem target: dense models up to this size (parameters) within 20%.
SMALL_DENSE_PARAMS = 8e9


def print_small(rows) -> None:
    """The small dense models of the dev files (issue 16: "within 20%"), one line each."""
    small = [r for r in rows if r["kind"] == "dense" and r["rec"].model.params <= SMALL_DENSE_PARAMS and r["use"]]
    ok = sum(abs(r["ratio"] - 1) <= 0.20 for r in small)
    print(f"small dense models (<= {SMALL_DENSE_PARAMS / 1e9:g}B parameters): {ok}/{len(small)} within 20%")
    for r in sorted(small, key=lambda r: r["rec"].model.params):
        rec = r["rec"]
        print(f"  {rec.id[:52]:<52} {rec.model.params / 1e9:5.1f}B {rec.cluster.gpus:>4} x {rec.cluster.gpu.name[:13]:<13} "
              f"{layout_label(rec.layout):<22} ratio {r['ratio']:.3f}")


def print_pairs(rows) -> None:
    pairs = setting_pairs(rows)
    print(f"setting pairs (same model, cluster, layout, batch, precision; only stated settings differ): {len(pairs)}")
    for a, b, diff, meas, est in pairs:
        print(f"  {b[:44]:<44} / {a[:44]:<44} differ in {', '.join(diff)}: measured x{meas:.3f}, estimated x{est:.3f}")


def scan(perf: Path, layouts: Path, name: str, values: list) -> None:
    """The targets with one Assumptions field at each of `values` (the others at their defaults):
    how a constant of the cost model is chosen, over every record at once, never per record."""
    print(f"scan of Assumptions.{name} over both dev files (unique configurations)")
    print(f"  {'value':>10}  {'<=15%':>6}  {'|log|':>6}  {'MoE<=20%':>8}  {'fits':>6}  {'old |log|':>9}  "
          f"{'pairs |log|':>9}")
    for v in values:
        A = Assumptions(**{name: v})
        new = unique(rows_2025(perf, A)[0])
        old = unique([r for r in rows_layouts(layouts, A)[0] if r["use"]])
        moe = [r for r in new if r["kind"] == "MoE"]
        pairs = setting_pairs(new)
        pair_err = statistics.fmean(abs(math.log(est / meas)) for *_, meas, est in pairs) if pairs else float("nan")
        print(f"  {v!s:>10}  {_within(new, 0.15):6.0%}  {_mean_log(new):6.3f}  {_within(moe, 0.20):8.0%}  "
              f"{sum(r['fits'] for r in new):>3}/{len(new):<2}  {_mean_log(old):9.3f}  {pair_err:9.3f}")


def _scan_values(text: str) -> tuple[str, list]:
    name, _, vals = text.partition("=")
    kind = type(Assumptions.model_fields[name].default)
    conv = (lambda x: x.lower() == "true") if kind is bool else kind
    return name, [conv(v) for v in vals.split(",")]


def main(argv: list[str]) -> int:
    def opt(name, default):
        return Path(argv[argv.index(name) + 1]) if name in argv else default
    perf, layouts = opt("--perf", PERF_2025), opt("--layouts", default_path())
    if "--scan" in argv:     # --scan NAME=V1,V2,...
        scan(perf, layouts, *_scan_values(argv[argv.index("--scan") + 1]))
        return 0
    A = Assumptions()
    new, skip_new = rows_2025(perf, A)
    old_all, skip_old = rows_layouts(layouts, A)
    old_scored = [r for r in old_all if r["use"]]
    print(f"{perf.name}: {len(new)} records estimated, {len(unique(new))} unique configurations")
    print(f"{layouts.name}: {len(old_all)} records with reported throughput estimated "
          f"({len(old_scored)} scored, {len(unique(old_scored))} unique)\n")
    if "--verbose" in argv:
        print("ratio = estimated / reported throughput; conv = F_mb per token / the page's (TFLOP/s / tokens/s); "
              "mem/cap = estimated memory / HBM;\nterms = shares of the estimated step; MFU* = advisor's "
              "Estimate.mfu (full s^2 attention, dense 16-bit peak), not the page's convention\n")
        print_records(new)
        print()
        print_records(old_all)
        print()
    print_skipped(skip_new, perf.name)
    print_skipped(skip_old, layouts.name + " (rows reporting throughput)")
    shown = [r["rec"].id for r in old_all if not r["use"]]
    if shown:
        print(f"{layouts.name}: shown in --verbose but not scored (no calibrated convention, as in "
              f"calibrate_throughput.py): {', '.join(shown)}")
    convs = [r["conv"] for r in new if r["conv"] is not None]
    if convs:
        off = [(r["rec"].id, r["conv"]) for r in new if r["conv"] is not None and abs(r["conv"] - 1) > 0.01]
        print(f"\nFLOP convention check ({perf.name}, {len(convs)} rows with tokens/s): F_mb per token / reported "
              f"per token: median {statistics.median(convs):.3f}, range {min(convs):.3f}-{max(convs):.3f}; "
              f"off by > 1%: {len(off)}")
        for rid, c in off:
            print(f"  {rid}: {c:.3f}")
    print()
    print_summary(unique(new), perf.name, new)
    print()
    print_summary(unique(old_scored), layouts.name + " (scored rows)", old_scored)
    print()
    print_summary(unique(new) + unique(old_scored), "both files")
    print()
    print_targets(unique(new), unique(old_scored))
    print()
    print_small(unique(new) + unique(old_scored))
    print()
    print_pairs(unique(new))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
