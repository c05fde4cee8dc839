"""The built-in GPU and model presets: they build, carry sources, and resolve by name and alias."""

from __future__ import annotations

import re

import pytest

import advisor
from advisor.inputs import presets

GIB = 2**30
YEAR = re.compile(r"\b(19|20)\d\d\b")

# DESIGN.md section 2, plus the aliases the brief names.
DESIGN_GPUS = ["V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-SXM-80GB", "H100", "H800", "H200",
               "B200", "B300", "GB200", "GB300", "MI300X", "L40S"]
GPU_ALIASES = {"A100": "A100-80GB", "A100-SXM-80GB": "A100-80GB", "H100": "H100-SXM-80GB",
               "H100-SXM": "H100-SXM-80GB"}
DESIGN_MODELS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
                 "llama-3.1-70b", "llama-3.1-405b", "gpt-3-175b", "mixtral-8x7b", "mixtral-8x22b",
                 "deepseek-v3", "qwen2.5-7b", "qwen2.5-72b", "falcon-40b", "falcon-180b", "bloom-176b"]

# Models that published training records name (benchmarks/published.py resolves record names to
# presets by these spellings: parenthesised text dropped, lower-cased, spaces to '-', a trailing
# -vX.Y dropped, "gpt3" also tried as "gpt-3").
RECORD_MODELS = {"mistral-7b-v0.1": "mistral-7b", "llama-7b": "llama-7b", "gemma-7b": "gemma-7b",
                 "starcoder2-15b": "starcoder2-15b", "smollm3-3b": "smollm3-3b",
                 "nemotron-340b": "nemotron-4-340b", "gpt3-5b": "gpt-3-5b", "gpt3-20b": "gpt-3-20b"}


@pytest.mark.parametrize("name", presets.gpu_names())
def test_gpu_preset_builds_with_a_source(name):
    gpu = advisor.GPU(**presets.gpu(name))
    assert gpu.name == name
    assert gpu.source.strip() and gpu.source != "user-supplied"
    assert YEAR.search(gpu.source), "the source names the datasheet year"
    assert gpu.peak_flops >= 1e14
    assert gpu.memory >= 16 * GIB
    assert gpu.nvlink_bandwidth > 0 and gpu.network_bandwidth > 0 and gpu.host_memory >= 256 * GIB
    if gpu.peak_flops_fp8 is not None:              # dense FP8 is twice dense BF16 on every part listed
        assert 1.9 <= gpu.peak_flops_fp8 / gpu.peak_flops <= 2.1


@pytest.mark.parametrize("name", DESIGN_GPUS)
def test_design_gpu_names_resolve_case_insensitively(name):
    for spelling in (name, name.lower(), name.upper()):
        assert advisor.GPU(**presets.gpu(spelling)).peak_flops >= 1e14
    cluster = advisor.Cluster(gpu=name.lower(), gpus=8 if name not in ("GB200", "GB300") else 72)
    assert cluster.gpu.memory >= 16 * GIB


@pytest.mark.parametrize(("alias", "name"), sorted(GPU_ALIASES.items()))
def test_gpu_aliases(alias, name):
    assert presets.gpu(alias) == presets.gpu(name)
    assert presets.gpu(alias.lower())["name"] == name


def test_gpu_figures_that_planning_depends_on():
    h100 = advisor.GPU(**presets.gpu("H100"))
    assert (h100.memory, h100.peak_flops, h100.nvlink_bandwidth) == (80 * GIB, 989e12, 900e9)
    assert h100.network_bandwidth == 400e9 / 8
    assert advisor.GPU(**presets.gpu("A100-80GB")).memory == 81920 * 2**20     # nvidia-smi MiB
    assert advisor.GPU(**presets.gpu("H800")).nvlink_bandwidth == 400e9
    assert advisor.GPU(**presets.gpu("V100-16GB")).peak_flops_fp8 is None
    l40s = advisor.GPU(**presets.gpu("L40S"))
    assert l40s.nvlink_domain == 1 and l40s.nvlink_bandwidth == 64e9          # PCIe Gen4 x16, no NVLink
    assert "PCIe" in l40s.source


def test_nvl72_racks():
    cluster = advisor.Cluster(gpu="GB200", gpus=72)
    assert cluster.nvlink_domain == 72
    assert cluster.gpus_per_node == 4 and cluster.nodes == 18
    assert advisor.Cluster(gpu="GB300", gpus=144).nvlink_domain == 72


def test_pcie_card_cluster_builds():
    cluster = advisor.Cluster(gpu="L40S", gpus=16)
    assert cluster.nvlink_domain == 1 and cluster.gpus_per_node == 8


@pytest.mark.parametrize("name", presets.model_names())
def test_model_preset_builds_with_a_source(name):
    model = advisor.Model.preset(name)
    assert model.name == name == name.lower()
    assert model.source.strip() and model.source != "user-supplied"
    assert model.params > 1e9
    # seq_len is the pretraining context where the source states one (None: Training's default applies
    # and the trace says so; Qwen3-Next and Falcon-H1 state only the supported length, max_position)
    assert model.max_position and (model.seq_len is None or model.seq_len <= model.max_position)
    assert advisor.Model.preset(name.upper()) == model


def test_design_model_names_resolve():
    for name in DESIGN_MODELS:
        assert advisor.Model.preset(name).params > 5e9
    assert {m.lower() for m in DESIGN_MODELS} <= set(presets.model_names())


@pytest.mark.parametrize(("spelling", "name"), sorted(RECORD_MODELS.items()))
def test_record_model_names_resolve(spelling, name):
    model = advisor.Model.preset(spelling)
    assert model.name == name and model == advisor.Model.preset(name)


def test_record_model_shapes():
    shape = lambda n: (lambda m: (m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab,  # noqa: E731
                                  m.tied_embeddings))(advisor.Model.preset(n))
    assert shape("mistral-7b") == (32, 4096, 32, 8, 14336, 32000, False)
    assert shape("llama-7b") == (32, 4096, 32, 32, 11008, 32000, False)
    assert shape("gemma-7b") == (28, 3072, 16, 16, 24576, 256000, True)
    assert shape("starcoder2-15b") == (40, 6144, 48, 4, 24576, 49152, False)
    assert shape("smollm3-3b") == (36, 2048, 16, 4, 11008, 128256, True)
    assert shape("nemotron-4-340b") == (96, 18432, 96, 8, 73728, 256000, False)
    gemma, sc2 = advisor.Model.preset("gemma-7b"), advisor.Model.preset("starcoder2-15b")
    assert gemma.head_dim == 256 and gemma.activation == "swiglu"        # GeGLU: the gated MLP
    assert (sc2.activation, sc2.norm, sc2.bias) == ("gelu", "layernorm", True)
    assert advisor.Model.preset("llama-7b").seq_len == 2048
    assert (advisor.Model.preset("mistral-7b").seq_len, advisor.Model.preset("mistral-7b").max_position) == (8192, 32768)


def test_unknown_gpu_names_the_closest_and_keeps_every_name_as_data():
    """The message names the closest presets (issue 36: not 30 names on one line); `known` and
    `want` hold them all."""
    with pytest.raises(advisor.UnknownPresetError) as info:
        presets.gpu("H1000")
    err = info.value
    assert isinstance(err, ValueError)
    assert err.known == err.want == presets.gpu_names()
    assert "did you mean H100" in str(err) and "GB300" not in str(err)


def test_unknown_model_names_the_closest_and_keeps_every_name_as_data():
    with pytest.raises(advisor.UnknownPresetError) as info:
        advisor.Model.preset("llama-9-1t")
    assert info.value.known == presets.model_names()
    assert "llama-" in info.value.hint and "deepseek-v3" not in str(info.value)


def test_unknown_gpu_in_a_cluster_is_a_value_error():
    with pytest.raises(ValueError, match="H1000"):
        advisor.Cluster(gpu="H1000", gpus=8)


def test_preset_files_carry_no_unknown_keys():
    gpu_fields, model_fields = set(advisor.GPU.model_fields), set(advisor.Model.model_fields)
    for entry in presets.gpu_entries():
        assert set(entry) - {"aliases"} <= gpu_fields, entry["name"]
    for entry in presets.model_entries():
        assert set(entry) - {"aliases", "published_params"} <= model_fields, entry["name"]


def test_qwen3_moe_preset_shapes():
    """Qwen/Qwen3-235B-A22B and Qwen/Qwen3-30B-A3B config.json: GQA with head_dim 128 (wider than
    hidden / heads for 235B), 128 routed experts top-8 on every layer, no shared expert, untied."""
    big, small = advisor.Model.preset("qwen3-235b-a22b"), advisor.Model.preset("qwen3-30b-a3b")
    for m, shape, moe_ffn in ((big, (94, 4096, 64, 4, 12288, 151936, False), 1536),
                              (small, (48, 2048, 32, 4, 6144, 151936, False), 768)):
        assert (m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab, m.tied_embeddings) == shape
        assert m.head_dim == 128 and (m.activation, m.norm, m.bias, m.qkv_bias) == ("swiglu", "rmsnorm", False, False)
        assert (m.experts, m.experts_per_token, m.moe_ffn_hidden, m.shared_experts) == (128, 8, moe_ffn, 0)
        assert (m.dense_layers, m.moe_layer_freq, m.mla, m.mtp_layers) == (0, 1, None, 0)
        assert (m.seq_len, m.max_position) == (4096, 40960)
        assert "QK-Norm" in m.source and "Megatron-MoE-ModelZoo" in m.source
    assert big.heads * big.head_dim == 8192 != big.hidden                      # 4096 / 64 would be 64
    assert small.heads * small.head_dim == 4096 != small.hidden


def test_qwen3_235b_a22b_recommendation_on_256_h100():
    rec = advisor.recommend(advisor.Cluster(gpu="H100-SXM-80GB", gpus=256), "qwen3-235b-a22b",
                            advisor.Training(seq_len=4096, global_batch_size=2048))
    assert rec.status == "recommended" and rec.layout is not None
    lay = rec.layout
    assert lay.tp * lay.pp * lay.dp * lay.cp == 256
    assert lay.ep > 1 and 128 % lay.ep == 0                                     # experts are sharded
    assert rec.estimates.memory.fits
    assert rec.model.name == "qwen3-235b-a22b" and rec.training.global_batch_size == 2048


# Issue 36: the parts users have that were refused with "run advisor presets". Each builds from its
# datasheet figures (test_gpu_preset_builds_with_a_source above checks the source and its year).
ISSUE_36_GPUS = {"H100-PCIe": (80, 756e12), "H100-NVL": (94, 835.5e12), "H200-NVL": (141, 835.5e12),
                 "A100-80GB-PCIe": (80, 312e12), "A100-40GB-PCIe": (40, 312e12), "RTX-4090": (24, 165.2e12),
                 "RTX-5090": (32, 209.5e12), "RTX-6000-Ada": (48, 364.2e12), "A6000": (48, 154.8e12),
                 "L40": (48, 181.05e12), "MI250X": (64, 191.5e12), "MI325X": (256, 1307.4e12),
                 "MI355X": (288, 2516.6e12), "H20": (96, 148e12), "GH200": (96, 989e12)}


@pytest.mark.parametrize(("name", "figures"), sorted(ISSUE_36_GPUS.items()))
def test_issue_36_presets(name, figures):
    gpu = advisor.GPU(**presets.gpu(name))
    assert (gpu.memory / GIB, gpu.peak_flops) == figures
    assert "datasheet" in gpu.source or "whitepaper" in gpu.source or "specifications" in gpu.source


@pytest.mark.parametrize("spelling", ["RTX4090", "rtx-4090", "H100-PCIe", "A100-PCIe", "mi250x", "H20"])
def test_issue_36_spellings_resolve(spelling):
    assert advisor.Cluster(gpu=spelling, gpus=8).gpu.name in ISSUE_36_GPUS


@pytest.mark.parametrize("name", ["H100-PCIe", "A100-80GB-PCIe", "A100-40GB-PCIe", "RTX-4090", "RTX-5090",
                                  "RTX-6000-Ada", "A6000", "L40"])
def test_pcie_cards_have_no_nvlink_domain(name):
    """A card whose NVLink bridge is optional or absent: every GPU-to-GPU transfer crosses PCIe."""
    gpu = advisor.GPU(**presets.gpu(name))
    assert gpu.nvlink_domain == 1 and gpu.nvlink_bandwidth in (64e9, 128e9)       # PCIe Gen4 / Gen5 x16
    assert "PCIe" in gpu.source


def test_nvl_bridges_and_the_mi250x_gcd():
    assert advisor.Cluster(gpu="H100-NVL", gpus=16).nvlink_domain == 2            # the bridged pair
    assert advisor.Cluster(gpu="H200-NVL", gpus=16).nvlink_domain == 4            # the 4-way bridge
    gcd = advisor.GPU(**presets.gpu("MI250X"))
    assert gcd.peak_flops_fp8 is None and "GCD" in gcd.source                       # one of the module's two dies
    assert advisor.GPU(**presets.gpu("MI355X")).peak_flops_fp4 == pytest.approx(4 * 2516.6e12, rel=1e-4)
