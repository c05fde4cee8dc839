"""A GPU without a preset, described on the command line or in a file, and the network stated there
(issue 36: "--gpu RTX4090, H100-PCIe, MI250X, a JSON file of GPU fields: all refused")."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import advisor
from advisor.cli import main
from advisor.inputs import presets
from advisor.inputs.gpu_file import MAX_GPU_FILE_BYTES
from advisor.inputs.specs import PCIE_GEN4_X16

GIB = 2**30
MI210 = {"name": "MI210", "memory": "64 GiB", "peak_flops": "181 TFLOP/s",
         "source": "AMD Instinct MI210 datasheet (2022)"}


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_a_pcie_card_needs_no_nvlink_bandwidth():
    """Omitted nvlink_bandwidth means no NVLink: one GPU per domain (every transfer crosses PCIe and is
    priced at the network's figure, as the L40S preset is), the PCIe x16 figure kept for the record."""
    gpu = advisor.GPU(memory="24 GiB", peak_flops="165 TFLOP/s")
    assert (gpu.nvlink_domain, gpu.nvlink_bandwidth) == (1, PCIE_GEN4_X16)
    assert advisor.GPU.model_validate_json(gpu.model_dump_json()) == gpu          # a stable round trip
    gen5 = advisor.GPU(memory="32 GiB", peak_flops="209 TFLOP/s", host_bandwidth="64 GB/s")
    assert gen5.nvlink_bandwidth == 128e9                                         # both directions
    assert advisor.Cluster(gpu=gpu, gpus=16).nvlink_domain == 1
    rec = advisor.recommend(advisor.Cluster(gpu=gpu, gpus=8), "llama-3-8b", {"seq_len": 4096, "global_batch_size": 64})
    assert rec.status == "recommended" and rec.layout.tp == 1        # TP stays inside the (single-GPU) domain


def test_an_nvlink_domain_without_its_bandwidth_is_refused():
    with pytest.raises(ValueError, match="GPU.nvlink_bandwidth") as info:
        advisor.GPU(memory="24 GiB", peak_flops="165 TFLOP/s", nvlink_domain=8)
    assert "nvlink_domain is 8" in str(info.value)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_gpu_file_builds_a_cluster(tmp_path, suffix):
    path = tmp_path / f"mi210{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(MI210))
    else:
        path.write_text("[gpu]\n" + "".join(f'{k} = "{v}"\n' for k, v in MI210.items()))
    for given in (path, str(path)):
        cluster = advisor.Cluster(gpu=given, gpus=8)
        assert (cluster.gpu.name, cluster.gpu.memory, cluster.gpu.peak_flops) == ("MI210", 64 * GIB, 181e12)
    assert advisor.GPU.from_file(path) == cluster.gpu


@pytest.mark.parametrize(("content", "words"), [
    ("memory = ", "does not parse"),
    ("[1, 2]", "not a table"),
    ("x" * (MAX_GPU_FILE_BYTES + 1), "at most"),
])
def test_a_bad_gpu_file_names_the_file(tmp_path, content, words):
    path = tmp_path / ("bad.toml" if content.startswith("memory") else "bad.json")
    path.write_text(content)
    with pytest.raises(advisor.InputError) as info:
        advisor.GPU.from_file(path)
    assert info.value.field == "Cluster.gpu" and str(path) in str(info.value) and words in str(info.value)
    with pytest.raises(ValueError, match="missing.toml"):
        advisor.Cluster(gpu=tmp_path / "missing.toml", gpus=8)


def test_unknown_gpu_says_how_to_describe_one():
    with pytest.raises(advisor.UnknownPresetError) as info:
        presets.gpu("H100-80GB")
    assert info.value.hint.startswith("did you mean H100-SXM-80GB")              # its own family first
    assert "--gpu-spec FILE" in info.value.hint and "advisor.GPU(" in info.value.hint


def test_cli_gpu_spec_and_overrides(tmp_path):
    path = tmp_path / "mi210.json"
    path.write_text(json.dumps(MI210))
    code, out, _ = run(["recommend", "--model", "llama-3-8b", "--gpus", "8", "--gpu-spec", str(path), "--json"])
    assert code == 0 and json.loads(out)["cluster"]["gpu"]["name"] == "MI210"
    code, out, _ = run(["recommend", "--model", "llama-3-8b", "--gpus", "8", "--gpu", "H100", "--gpu-memory", "94 GiB",
                        "--gpu-flops", "835 TFLOP/s", "--json"])
    gpu = json.loads(out)["cluster"]["gpu"]
    assert code == 0 and (gpu["memory"], gpu["peak_flops"]) == (94 * GIB, 835e12)
    assert gpu["name"] == "H100-SXM-80GB (modified)" and "from the command line" in gpu["source"]
    missing = str(tmp_path / "no.json")
    code, _out, err = run(["recommend", "--model", "llama-3-8b", "--gpus", "8", "--gpu-spec", missing])
    assert code == 2 and "no.json" in err
    code, _out, err = run(["recommend", "--model", "llama-3-8b", "--gpus", "8"])
    assert code == 2 and "--gpu" in err                                           # one of --gpu / --gpu-spec


def test_cli_network_flags_reach_the_cluster_and_the_answer():
    """'16 nodes of 8 H100 with 400 Gb/s InfiniBand per GPU': stated on the command line, it is what
    the estimate uses (a slower network moves the answer towards fewer data-parallel replicas)."""
    base = ["recommend", "--model", "llama-3-70b", "--gpu", "H100", "--gpus", "128", "--json"]
    answers = {}
    for rate in ("400Gbit/s", "25Gbit/s"):
        code, out, _ = run([*base, "--inter-node-bandwidth", rate])
        rec = json.loads(out)
        assert code == 0 and rec["cluster"]["inter_node_bandwidth"] == float(rate.removesuffix("Gbit/s")) * 1e9 / 8
        answers[rate] = rec["layout"]
    assert answers["400Gbit/s"]["dp"] > answers["25Gbit/s"]["dp"]
    code, out, _ = run([*base, "--nvlink-domain", "4", "--intra-node-bandwidth", "600 GB/s"])
    cluster = json.loads(out)["cluster"]
    assert code == 0 and (cluster["nvlink_domain"], cluster["intra_node_bandwidth"]) == (4, 600e9)


def test_presets_are_listed_with_their_sources():
    code, out, _ = run(["presets"])
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert code == 0 and "PCIe" in rows["RTX-4090"] and "NVLink 2" in rows["H100-NVL"] and "NVLink 72" in rows["GB200"]
    code, out, _ = run(["presets", "rtx4090", "--width", "80"])
    flat = " ".join(out.split())
    assert code == 0 and out.startswith("RTX-4090 (gpu preset)")
    assert "source: NVIDIA Ada GPU Architecture whitepaper" in flat
    assert max(map(len, out.splitlines())) <= 80
    code, out, _ = run(["presets", "llama-3-8b", "--json"])
    assert code == 0 and json.loads(out)["kind"] == "model" and json.loads(out)["source"]
    code, _out, err = run(["presets", "h100-nv"])
    assert code == 2 and "did you mean H100-NVL" in err


def test_an_unknown_preset_lists_the_names_as_data_in_json():
    code, out, _ = run(["recommend", "--model", "llama-3-8b", "--gpu", "RTX4080", "--gpus", "8", "--json"])
    error = json.loads(out)["error"]
    assert code == 2 and error["known"] == presets.gpu_names() and "RTX-4090" in error["hint"]
