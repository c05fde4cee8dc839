"""The Hugging Face exports: accelerate's config for a DeepSpeed layout and PEFT's LoraConfig
arguments, checked against the libraries' own classes when they are installed (they need torch,
which advisor does not depend on), and against the key tables otherwise."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest

import advisor
from advisor.errors import InputError
from advisor.export.hf import (ACCELERATE_DEEPSPEED_KEYS, ACCELERATE_KEYS, BNB_KEYS, LORA_KEYS, accelerate_config,
                               peft_config)

CLUSTER = advisor.Cluster(gpu="H100-SXM-80GB", gpus=16)
HAVE_HF = all(importlib.util.find_spec(m) for m in ("peft", "accelerate", "yaml"))


def _lora(task="lora"):
    rec = advisor.recommend(advisor.Cluster(gpu="H100-SXM-80GB", gpus=8), "llama-3-70b",
                            advisor.Training(task=task))
    return rec


def _zero3():
    return advisor.Layout(framework="deepspeed", tp=1, pp=1, dp=16, zero_stage=3, micro_batch_size=1)


def test_accelerate_config_points_at_the_deepspeed_json_and_names_the_cluster():
    text = accelerate_config(_zero3(), advisor.Model.preset("llama-3-8b"), advisor.Training(seq_len=4096,
                             global_batch_size=64), CLUSTER)
    keys = {line.split(":")[0] for line in text.splitlines() if line and not line.startswith(("#", " "))}
    nested = {line.split(":")[0].strip() for line in text.splitlines() if line.startswith("  ")}
    assert keys == set(ACCELERATE_KEYS) and nested == set(ACCELERATE_DEEPSPEED_KEYS)
    assert "num_processes: 16" in text and "num_machines: 2" in text and "zero3_init_flag: true" in text


def test_accelerate_config_is_for_deepspeed_layouts_only():
    with pytest.raises(InputError) as err:
        accelerate_config(advisor.Layout(tp=8, pp=2, dp=1), advisor.Model.preset("llama-3-8b"),
                          advisor.Training(seq_len=4096, global_batch_size=64), CLUSTER)
    assert err.value.field == "Layout.framework"


def test_peft_config_is_the_estimated_adapter():
    rec = _lora()
    cfg = json.loads(peft_config(advisor.Model.preset("llama-3-70b"), rec.training))
    lora = cfg["lora_config"]
    assert set(lora) == set(LORA_KEYS)
    assert (lora["r"], lora["lora_alpha"]) == (rec.training.lora_rank, rec.training.lora_alpha)
    assert set(lora["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert "bnb_config" not in cfg
    q = json.loads(peft_config(advisor.Model.preset("llama-3-70b"), _lora("qlora").training))
    assert q["bnb_config"]["bnb_4bit_quant_type"] == "nf4"
    assert set(q["bnb_config"]) == set(BNB_KEYS) - {"bnb_4bit_quant_storage"} and "from_pretrained_kwargs" not in q


def test_a_qlora_base_zero3_shards_is_stored_and_loaded_in_the_16_bit_type():
    """PEFT's QLoRA + DeepSpeed ZeRO-3 recipe: bnb_4bit_quant_storage and from_pretrained's dtype are the same
    16-bit type (bf16; fp16 where the job runs fp16, as on a V100), and the compute dtype follows the job's."""
    rec = advisor.recommend({"gpu": "L40S", "gpus": 1}, "llama-3-70b", {"task": "qlora"})
    assert rec.layout.zero_stage == 3
    q = json.loads(peft_config(rec.model, rec.training, rec.layout))
    assert set(q["bnb_config"]) == set(BNB_KEYS)
    assert q["bnb_config"]["bnb_4bit_quant_storage"] == q["from_pretrained_kwargs"]["dtype"] == "bfloat16"
    fp16 = rec.training.model_copy(update={"precision": "fp16"})
    q16 = json.loads(peft_config(rec.model, fp16, rec.layout))
    assert q16["bnb_config"]["bnb_4bit_compute_dtype"] == q16["bnb_config"]["bnb_4bit_quant_storage"] == "float16"
    zero1 = json.loads(peft_config(rec.model, rec.training, rec.layout.model_copy(update={"zero_stage": 1})))
    assert "bnb_4bit_quant_storage" not in zero1["bnb_config"]


def test_peft_config_needs_an_adapter_and_known_module_names():
    with pytest.raises(InputError) as err:
        peft_config(advisor.Model.preset("llama-3-8b"), advisor.Training(seq_len=4096, global_batch_size=64))
    assert err.value.field == "Training.task"
    with pytest.raises(InputError) as err:
        peft_config(advisor.Model.preset("deepseek-v3"), _lora().training)
    assert err.value.field == "Model"


@pytest.mark.skipif(not HAVE_HF, reason="peft / accelerate are not installed here (they need torch)")
def test_the_libraries_accept_both(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser
    from peft import LoraConfig
    path = tmp_path / "accelerate.yaml"
    path.write_text(accelerate_config(_zero3(), advisor.Model.preset("llama-3-8b"),
                                      advisor.Training(seq_len=4096, global_batch_size=64), CLUSTER))
    config = load_config_from_file(str(path))
    assert str(config.distributed_type) == "DistributedType.DEEPSPEED"
    dests = {a.dest for a in launch_command_parser()._actions}
    assert set(config.deepspeed_config) <= dests
    kwargs = json.loads(peft_config(advisor.Model.preset("llama-3-70b"), _lora().training))["lora_config"]
    assert LoraConfig(**kwargs).r == kwargs["r"]
    assert set(kwargs) <= {f.name for f in dataclasses.fields(LoraConfig)}
    from transformers import BitsAndBytesConfig
    rec = advisor.recommend({"gpu": "L40S", "gpus": 1}, "llama-3-70b", {"task": "qlora"})
    bnb = json.loads(peft_config(rec.model, rec.training, rec.layout))["bnb_config"]
    assert str(BitsAndBytesConfig(**bnb).bnb_4bit_quant_storage) == "torch.bfloat16"


def test_cli_writes_each_config_alone_on_stdout(capsys):
    from advisor.cli import main
    assert main(["recommend", "--gpu", "H100-SXM-80GB", "--gpus", "8", "--model", "llama-3-70b", "--task", "lora",
                 "--format", "peft"]) == 0
    assert json.loads(capsys.readouterr().out)["lora_config"]["r"] == 16
    assert main(["recommend", "--gpu", "A100-80GB", "--gpus", "8", "--model", "llama-2-7b", "--format", "accelerate"]) == 0
    assert "distributed_type: DEEPSPEED" in capsys.readouterr().out
    assert main(["recommend", "--gpu", "H100-SXM-80GB", "--gpus", "8", "--model", "llama-3-8b", "--format", "peft"]) == 2
    assert "Training.task" in capsys.readouterr().err
