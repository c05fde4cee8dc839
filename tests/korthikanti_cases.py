"""The Korthikanti et al. 2022 measured runs as advisor objects (used by the calibration benchmark
and the tests).

Configurations (paper Table 3; data file korthikanti2022-measured*.json): GPT models with GeLU,
4h FFN, LayerNorm, biases, learned positions, tied embeddings, vocabulary 51200, sequence 2048, on
A100 80GB DGX nodes, no data parallelism. What the file does not state and is assumed here:
- precision bf16 (Fig. 1's 45.56 GiB params+optimizer equals 12*L*h^2 * 18 B / (t*p), the 18 B/param
  of 16-bit weights with fp32 main grads and Adam);
- the unfused softmax attention of 2022 Megatron-LM (no FlashAttention), dropout 0.1 (masks stored);
- the 175B run uses the interleaved schedule with 3 model chunks per stage (paper §6: "interleaving
  schedule with three interleaving stages"; its Fig. 1 value 66.84 GiB = 51.75 x (1 + 7/24));
- modes: none = TP only; seq = + sequence parallelism; sel = + selective recompute;
  seqsel = both; full = full recompute without SP.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor import Cluster, Layout, Model, Training

__all__ = ["MODES", "load_cases", "case_objects"]

MODES = {
    "none": (False, "none"),
    "seq": (True, "none"),
    "sel": (False, "selective"),
    "seqsel": (True, "selective"),
    "full": (False, "full"),
}


def load_cases(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def case_objects(case: dict):
    """(cluster, model, training, {mode: layout}) for one case of the data file."""
    h = case["hidden"]
    model = Model(
        name=case["name"], layers=case["layers"], hidden=h, heads=case["heads"], ffn_hidden=4 * h,
        vocab=case["vocab"], activation="gelu", norm="layernorm", bias=True, tied_embeddings=True,
        position_embedding="learned", max_position=case["seq_len"],
    )
    cluster = Cluster(gpu="A100-80GB", gpus=case["gpus"])
    training = Training(seq_len=case["seq_len"], global_batch_size=case["global_batch_size"],
                        micro_batch_size=case["micro_batch_size"], precision="bf16", flash_attention=False)
    vpp = 3 if case["pp"] > 1 else 1
    layouts = {
        mode: Layout(framework="megatron", tp=case["tp"], pp=case["pp"], vpp=vpp, sp=sp, recompute=rc,
                     micro_batch_size=case["micro_batch_size"], zero_stage=0)
        for mode, (sp, rc) in MODES.items()
    }
    return cluster, model, training, layouts
