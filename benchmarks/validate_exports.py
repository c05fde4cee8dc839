"""Feed advisor's launch configs to the frameworks' own parsers and validators (issue 20 item 4).

On demand, not in CI: it installs torch (CPU), DeepSpeed and the Python dependencies of Megatron-LM and
torchtitan into a virtual environment, fetches the two frameworks' source trees at the commits of
benchmarks/validate_exports.toml, exports every scenario of that file with advisor, and runs in a fresh
process per check:

- Megatron-LM (main, core_v0.16.1): `parse_args(ignore_unknown_args=False)`, `validate_args` and
  `core_transformer_config_from_args` (Megatron-Core's TransformerConfig checks), with the user's own
  flags (tokenizer, data, lr, iterations) added as Megatron needs them;
- DeepSpeed: `DeepSpeedConfig` at the real world size on torch's fake process group, with a
  model-parallel unit reporting dp for Megatron-DeepSpeed layouts; for offload layouts also
  `deepspeed.initialize` and one step of a tiny model with no client optimizer, on the CPU accelerator;
- torchtitan main: `ConfigManager().parse_args(--module M --config F <overrides>)` and
  `ParallelDims.from_config(...).build_mesh()`; torchtitan v0.2.2: `ConfigManager().parse_args(
  --job.config_file <toml>)` and `ParallelDims(...).build_mesh()`.
- Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed f4157be): its `parse_args` + `validate_args`, and
  `deepspeed.initialize` of the engine it builds, DeepSpeed's pipeline engine (a PipelineModule over its
  pp x mp x dp grid) unless the export says --no-pipeline-parallel, with a client optimizer as Megatron-DeepSpeed
  passes one; DeepSpeedConfig also from the JSON's file path;
- fine-tuning jobs (Training.task lora / qlora): Megatron-Bridge's run_recipe.py overrides against the
  ConfigContainer dataclasses' fields in its source (and Megatron-Core's at Megatron-LM main; the package needs a
  GPU stack to import), and for DeepSpeed layouts PEFT's LoraConfig, transformers' BitsAndBytesConfig, TRL's
  SFTConfig (on the CPU, without bf16) and accelerate's load_config_from_file; every DeepSpeed layout also gets
  the TRL / accelerate check.

It prints a table (accepted / refused, with the first line of every error verbatim) and, with
--snapshot, writes tests/data/frameworks/*.json: the flag names of Megatron's real parser and the key
names of torchtitan's config dataclasses at each pin, which CI compares the exports with.

    python benchmarks/validate_exports.py --workdir .validate            # setup + run
    python benchmarks/validate_exports.py --workdir .validate --snapshot # also refresh the snapshots

Environment-only concessions (none touches a parser or validator): Megatron main declares Python >=
3.12, so `typing.override` is taken from typing_extensions; without a GPU,
`get_device_arch_version()` answers the target GPU's major version; without Transformer Engine the
TransformerConfig stage adds `--no-rope-fusion`; torchtitan's device type is "cpu".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "validate_exports.toml"
SNAPSHOTS = ROOT / "tests" / "data" / "frameworks"

# Flags Megatron needs that advisor leaves to the user (tokenizer, data, schedule): the export plus these.
MEGATRON_USER_FLAGS = ["--train-iters", "100", "--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer",
                       "--vocab-size", "128256"]


# ------------------------------------------------------------------------------------------ setup

def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def setup(work: Path, data: dict, mirrors: dict[str, str]) -> Path:
    """The framework venv and source trees under `work`; returns the venv's python."""
    venv = work / "fwvenv"
    py = venv / "bin" / "python"
    if not py.exists():
        _run([sys.executable, "-m", "venv", str(venv)])
    probe = subprocess.run([str(py), "-c", "import torch, deepspeed, tyro"], capture_output=True)
    if probe.returncode:
        _run([str(py), "-m", "pip", "install", "-q", data["torch"]["requirement"]])
        _run([str(py), "-m", "pip", "install", "-q", data["deepspeed"]["requirement"], *data["torch"]["extra"],
              *(req for rel in data["release"] for req in rel.get("pip", []))])
    if subprocess.run([str(py), "-c", "import peft, trl, accelerate"], capture_output=True).returncode:
        _run([str(py), "-m", "pip", "install", "-q", *data["hf"]["pip"]])
    for rel in data["release"]:
        tree = work / "src" / rel["name"]
        if tree.exists():
            continue
        tree.mkdir(parents=True)
        git_dir = mirrors.get(rel["repo"])
        if git_dir is None:
            clone = work / "git" / rel["repo"].replace("/", "+")
            if not clone.exists():
                _run(["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{rel['repo']}.git", str(clone)])
            git_dir = str(clone)
        # Megatron-DeepSpeed's megatron/arguments.py imports tools.retro
        tops = {"torchtitan": ["torchtitan"], "megatron-deepspeed": ["megatron", "tools"],
                "megatron-bridge": ["src/megatron/bridge", "scripts/training"]}.get(rel["framework"], ["megatron"])
        archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", rel["commit"], *tops],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return py


# ------------------------------------------------------------------------------------------ exports

def exports(data: dict) -> list[dict]:
    """One job per (scenario, format, release): the config text and what the checker needs."""
    import advisor
    from advisor import Cluster, Layout
    from advisor import export as ex

    jobs = []
    for sc in data["scenario"]:
        cluster = Cluster(gpu=sc["gpu"], gpus=sc["gpus"])
        training = {k: v for k, v in (("seq_len", sc.get("seq_len")), ("global_batch_size", sc.get("global_batch")),
                                      ("precision", sc.get("precision")), ("task", sc.get("task")),
                                      ("framework", sc.get("framework"))) if v is not None}
        assume = sc.get("assume")
        if "layout" in sc:
            res = advisor.audit(cluster, sc["model"], Layout(**sc["layout"]), training, assumptions=assume)
            layout = res.layout if res.ok else None
            status = "audit ok" if res.ok else f"audit error: {res.errors[0].rule_id}"
        else:
            res = advisor.recommend(cluster, sc["model"], training, assumptions=assume)
            layout, status = res.layout, res.status
        base = {"scenario": sc["name"], "gpus": cluster.gpus, "gpu_arch": _arch(cluster.gpu.name)}
        if layout is None:
            jobs.append({**base, "check": "-", "layout": "-", "result": f"not exported ({status})"})
            continue
        model, training = res.model, res.training
        A = res.estimates.assumptions if res.estimates is not None else advisor.Assumptions(**(assume or {}))
        targets = [(layout, layout.framework)]
        if training.frozen_base:                   # the fine-tuning job's own configs
            jobs += _finetune_jobs(base, layout, model, training, cluster, A)
            targets = []
        if targets and layout.framework != "torchtitan":   # the same layout under torchtitan, when its audit is ok
            twin = advisor.audit(cluster, model, layout.model_copy(update={"framework": "torchtitan", "etp": 1
                                                                            if layout.ep > 1 else None}), training)
            if twin.ok:
                targets.append((twin.layout, "torchtitan"))
        for lay, fw in targets:
            row = {**base, "layout": lay.id, "dp": lay.dp, "framework": lay.framework}
            if fw == "megatron+deepspeed":      # its own parser: microsoft/Megatron-DeepSpeed at the pin
                args = ex.megatron_args(lay, model, training, cluster, A)
                # an ALiBi model's command is BigScience's fork's (its note says so): checked by that parser
                check = "megatron-deepspeed-bigscience" if "alibi" in args else "megatron-deepspeed"
                jobs.append({**row, "check": check, "env": {}, "args": args})
                # the engine Megatron-DeepSpeed builds: DeepSpeed's pipeline engine unless --no-pipeline-parallel
                jobs.append({**row, "check": "deepspeed-engine", "config": ex.deepspeed_config(lay, model, training,
                             cluster, A), "mpu_dp": lay.dp, "pp": lay.pp, "pipeline": "--no-pipeline-parallel" not in args})
            if fw == "megatron":
                for version in ex.MEGATRON_PINS:
                    try:
                        args = ex.megatron_args(lay, model, training, cluster, A, version=version)
                    except advisor.InputError as exc:     # the export says this release cannot run it
                        jobs.append({**row, "check": f"megatron-{version}",
                                     "result": "not exported: " + str(exc).splitlines()[-1].strip()})
                        continue
                    jobs.append({**row, "check": f"megatron-{version}", "args": args,
                                 "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if "CUDA_DEVICE_MAX_CONNECTIONS=1"
                                 in ex.megatron_command(lay, model, training, cluster, A, version=version) else {}})
            if fw in ("deepspeed", "megatron+deepspeed"):
                jobs.append(_deepspeed_job(row, lay, model, training, cluster, A))
            if fw == "deepspeed":               # the Hugging Face launch of a DeepSpeed layout
                jobs += _hf_jobs(row, lay, model, training, cluster, A)
            if fw == "torchtitan":
                moe = model.is_moe
                jobs.append({**row, "check": "torchtitan-main", "moe": moe,
                             "args": ex.torchtitan_args(lay, model, training, cluster, A)})
                jobs.append({**row, "check": "torchtitan-v0.2.2", "moe": moe,
                             "toml": ex.torchtitan_toml(lay, model, training, cluster, A)})
    return jobs


def _finetune_jobs(base: dict, layout, model, training, cluster, A) -> list[dict]:
    """A LoRA / QLoRA job: Megatron-Bridge's overrides for a Megatron layout, PEFT / TRL / accelerate otherwise."""
    import advisor
    from advisor import export as ex

    row = {**base, "layout": layout.id, "dp": layout.dp, "framework": layout.framework}
    if layout.framework == "megatron":
        try:
            return [{**row, "check": "megatron-bridge", "overrides": ex.megatron_args(layout, model, training, cluster, A),
                     "command": ex.megatron_command(layout, model, training, cluster, A)}]
        except advisor.InputError as exc:
            return [{**row, "check": "megatron-bridge", "result": "not exported: " + str(exc).splitlines()[-1].strip()}]
    return [_deepspeed_job(row, layout, model, training, cluster, A), *_hf_jobs(row, layout, model, training, cluster, A)]


def _deepspeed_job(row: dict, layout, model, training, cluster, A) -> dict:
    """DeepSpeedConfig (from the dict and from its path); the model-parallel unit reports dp where the notes say
    the launcher's must (Megatron-DeepSpeed, or tp / pp > 1)."""
    from advisor import export as ex

    mpu = layout.framework != "deepspeed" or layout.tp > 1 or layout.pp > 1
    return {**row, "check": "deepspeed", "config": ex.deepspeed_config(layout, model, training, cluster, A),
            "mpu_dp": layout.dp if mpu else None, "engine": layout.offload != "none"}


def _hf_jobs(row: dict, layout, model, training, cluster, A) -> list[dict]:
    from advisor import export as ex

    if not hasattr(ex, "trl_config"):            # a release of advisor before the TRL export
        return [{**row, "check": "hf", "result": "not exported: no TRL export"}]
    job = {**row, "check": "hf", "ds_config": ex.deepspeed_config(layout, model, training, cluster, A),
           "accelerate": ex.accelerate_config(layout, model, training, cluster),
           "trl": json.loads(ex.trl_config(layout, model, training, cluster, A))}
    if training.frozen_base:
        job["peft"] = json.loads(ex.peft_config(model, training))
    return [job]


def _arch(gpu: str) -> int:
    return 8 if gpu.startswith("A100") else 10 if gpu.startswith(("B200", "GB")) else 9


# ------------------------------------------------------------------------------------------ checks (children)

CHILD = r'''
import json, os, sys, traceback, typing, warnings
warnings.filterwarnings("ignore")
job = json.loads(sys.stdin.read())
if not hasattr(typing, "override"):                      # Megatron main declares Python >= 3.12
    import typing_extensions
    typing.override = typing_extensions.override
stage = "import"
def done(ok, **kw):
    print("@@RESULT@@" + json.dumps({"ok": ok, "stage": stage, **kw}))
    sys.exit(0)
try:
    kind = job["check"]
    if kind == "megatron-deepspeed-bigscience":     # its parse_args validates as it parses
        os.environ.update({"WORLD_SIZE": str(job["gpus"]), "RANK": "0", "LOCAL_RANK": "0"})
        import megatron.arguments as A
        stage = "parse_args"
        sys.argv = ["pretrain_gpt.py", *job["args"], "--train-iters", "100", "--lr", "1e-4",
                    "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", "bigscience/tokenizer"]
        args = A.parse_args(ignore_unknown_args=False)
        done(True, detail=f"dp={args.data_parallel_size}, position embedding {args.position_embedding_type.name}")
    if kind == "megatron-deepspeed":
        os.environ.update({"WORLD_SIZE": str(job["gpus"]), "RANK": "0", "LOCAL_RANK": "0"})
        import megatron.arguments as A
        stage = "parse_args+validate_args"
        sys.argv = ["pretrain_gpt.py", *job["args"]]
        args = A.parse_args(ignore_unknown_args=False)
        A.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
        done(True, detail=f"dp={args.data_parallel_size}")
    if kind.startswith("megatron"):
        os.environ.update({"WORLD_SIZE": str(job["gpus"]), "RANK": "0", "LOCAL_RANK": "0", **job["env"]})
        import torch
        torch.cuda.get_device_capability = lambda *a, **k: (job["gpu_arch"], 0)
        import megatron.training.arguments as A
        A.get_device_arch_version = lambda: job["gpu_arch"]
        for stage, extra in (("parse_args+validate_args", []), ("core_transformer_config_from_args",
                                                                  job["user_flags"] + ["--no-rope-fusion"])):
            sys.argv = ["pretrain_gpt.py", *job["args"], *extra]
            args = A.parse_args(ignore_unknown_args=False)
            A.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
        A.core_transformer_config_from_args(args)
        done(True, detail=f"dp={args.data_parallel_size}")
    if kind == "hf":
        import tempfile
        stage = "accelerate load_config_from_file"
        from accelerate.commands.config.config_args import load_config_from_file
        work = tempfile.mkdtemp()
        with open(os.path.join(work, "ds_config.json"), "w") as f:
            json.dump(job["ds_config"], f)
        with open(os.path.join(work, "accelerate.yaml"), "w") as f:
            f.write(job["accelerate"])
        acc = load_config_from_file(os.path.join(work, "accelerate.yaml"))
        detail = f"accelerate {acc.distributed_type} x{acc.num_machines}"
        if "peft" in job:
            stage = "peft.LoraConfig"
            from peft import LoraConfig
            lora = LoraConfig(**job["peft"]["lora_config"])
            detail += f", LoraConfig r={lora.r}"
            if "bnb_config" in job["peft"]:
                stage = "transformers.BitsAndBytesConfig"
                import torch
                from transformers import BitsAndBytesConfig
                bnb = dict(job["peft"]["bnb_config"], bnb_4bit_compute_dtype=getattr(torch, job["peft"]["bnb_config"]
                                                                                     ["bnb_4bit_compute_dtype"]))
                detail += f", BitsAndBytesConfig {BitsAndBytesConfig(**bnb).bnb_4bit_quant_type}"
        stage = "trl.SFTConfig"
        from trl import SFTConfig
        sft = dict(job["trl"]["sft_config"], deepspeed=os.path.join(work, "ds_config.json"), output_dir=work,
                   use_cpu=True)
        sft.pop("bf16", None)            # no bf16 kernels on the CPU: the Trainer's check is the GPU's
        cfg = SFTConfig(**sft)
        done(True, detail=detail + f", SFTConfig gc={cfg.gradient_checkpointing} optim={cfg.optim} "
                                   f"max_length={cfg.max_length}")
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    stage = "fake process group"
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=job["gpus"])
    if kind == "deepspeed-engine":
        os.environ.update({"DS_ACCELERATOR": "cpu", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": str(job["gpus"]),
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
        import deepspeed
        deepspeed.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
        stage = "deepspeed.initialize (" + ("pipeline engine" if job["pipeline"] else "engine") + ")"
        def client(net):        # Megatron-DeepSpeed hands DeepSpeed its own optimizer unless the JSON names one
            return None if "optimizer" in job["config"] else torch.optim.AdamW(net.parameters())
        if job["pipeline"]:     # Megatron-DeepSpeed's GPTModelPipe: a PipelineModule over its pp x mp x dp grid
            from deepspeed.pipe import PipelineModule
            from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
            topo = PipeModelDataParallelTopology(num_pp=job["pp"], num_mp=job["gpus"] // job["pp"] // job["mpu_dp"],
                                                 num_dp=job["mpu_dp"])
            net = PipelineModule(layers=[torch.nn.Linear(16, 16) for _ in range(2 * job["pp"])], topology=topo,
                                 loss_fn=torch.nn.MSELoss())
            engine, *_ = deepspeed.initialize(model=net, optimizer=client(net), config=job["config"])
        else:                   # GPTModel on DeepSpeed's engine, Megatron's mpu reporting dp
            class MPU:
                def get_data_parallel_world_size(self): return job["mpu_dp"]
                def get_data_parallel_rank(self): return 0
                def get_data_parallel_group(self): return dist.group.WORLD
                def get_model_parallel_world_size(self): return job["gpus"] // job["mpu_dp"]
                def get_model_parallel_rank(self): return 0
                def get_model_parallel_group(self): return dist.group.WORLD
            net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 1))
            engine, *_ = deepspeed.initialize(model=net, optimizer=client(net), config=job["config"], mpu=MPU())
        done(True, detail=f"{type(engine).__name__}, ZeRO-{engine.zero_optimization_stage()}")
    if kind == "deepspeed":
        # what torchrun would set for rank 0 (the engine reads LOCAL_RANK itself)
        os.environ.update({"DS_ACCELERATOR": "cpu", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": str(job["gpus"]),
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
        import deepspeed
        from deepspeed.runtime.config import DeepSpeedConfig
        deepspeed.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
        class MPU:
            def get_data_parallel_world_size(self): return job["mpu_dp"]
            def get_data_parallel_rank(self): return 0
            def get_model_parallel_world_size(self): return job["gpus"] // job["mpu_dp"]
            def get_model_parallel_rank(self): return 0
        stage = "DeepSpeedConfig"
        cfg = DeepSpeedConfig(job["config"], mpu=MPU() if job["mpu_dp"] else None)
        detail = f"world_size={cfg.world_size}, gas={cfg.gradient_accumulation_steps}"
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(job["config"], f)
        # the file as deepspeed.initialize reads it: loaded to a dict first (deepspeed/__init__.py
        # `initialize`: `config = load_ds_config(config)` at 0.19.8), then DeepSpeedConfig. Given the path
        # itself, DeepSpeedConfig looks for sequence_parallel_size in the path string and counts every GPU
        # as data-parallel, which refused the Ulysses exports though initialize accepts them (their note
        # says to pass the file to initialize, or the loaded dict to DeepSpeedConfig).
        from deepspeed.runtime.tensor_parallel.init_utils import load_ds_config
        stage = "DeepSpeedConfig(path as deepspeed.initialize loads it)"
        DeepSpeedConfig(load_ds_config(f.name), mpu=MPU() if job["mpu_dp"] else None)
        detail += ", from its path too"
        if job["engine"]:
            stage = "deepspeed.initialize + step"
            net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 1)).to(torch.bfloat16)
            engine, *_ = deepspeed.initialize(model=net, model_parameters=net.parameters(), config=job["config"])
            loss = engine(torch.randn(1, 16, dtype=torch.bfloat16)).float().sum()
            engine.backward(loss)
            engine.step()
            detail += f", engine {type(engine.optimizer).__name__}"
        done(True, detail=detail)
    if kind == "torchtitan-main":
        from torchtitan.config import ConfigManager
        from torchtitan.distributed import ParallelDims
        module, config = ("deepseek_v3", "deepseek_v3_debugmodel") if job["moe"] else ("llama3", "llama3_debugmodel")
        stage = "ConfigManager.parse_args"
        cfg = ConfigManager().parse_args(["--module", module, "--config", config, *job["args"]])
        stage = "ParallelDims.build_mesh"
        pd = ParallelDims.from_config(cfg.parallelism, job["gpus"])
        pd.build_mesh()
        done(True, detail=f"dp_replicate={pd.dp_replicate} dp_shard={pd.dp_shard} cp={pd.cp} tp={pd.tp} pp={pd.pp} ep={pd.ep}")
    if kind == "torchtitan-v0.2.2":
        import tempfile
        from torchtitan.config import ConfigManager
        from torchtitan.distributed import ParallelDims
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(job["toml"])
        stage = "ConfigManager.parse_args(--job.config_file)"
        name, flavor = ("deepseek_v3", "debugmodel") if job["moe"] else ("llama3", "debugmodel")
        cfg = ConfigManager().parse_args(["--job.config_file", f.name, "--model.name", name, "--model.flavor", flavor])
        p = cfg.parallelism
        stage = "ParallelDims.build_mesh"
        pd = ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                          cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                          ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=job["gpus"])
        pd.build_mesh()
        stage = "batch"
        local, gbs = cfg.training.local_batch_size, cfg.training.global_batch_size
        assert gbs % (local * pd.dp_replicate * pd.dp_shard) == 0, "global batch size must be a multiple of local x dp"
        done(True, detail=f"dp_replicate={pd.dp_replicate} dp_shard={pd.dp_shard} cp={pd.cp} tp={pd.tp} pp={pd.pp} ep={pd.ep}")
    done(False, error=f"unknown check {kind}")
except SystemExit:
    raise
except BaseException as e:
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    done(False, error=f"{type(e).__name__} at {where}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
'''


def check(py: Path, work: Path, job: dict) -> dict:
    if job["check"] == "megatron-bridge" and "overrides" in job:
        return bridge_check(work, job)
    if not any(k in job for k in ("args", "config", "toml", "trl")):
        return {"ok": None, "stage": "-", "error": job["result"]}
    tree = {"megatron-main": "megatron-main", "megatron-core_v0.16.1": "megatron-core_v0.16.1",
            "megatron-deepspeed": "megatron-deepspeed",
            "megatron-deepspeed-bigscience": "megatron-deepspeed-bigscience",
            "torchtitan-main": "torchtitan-main", "torchtitan-v0.2.2": "torchtitan-v0.2.2"}.get(job["check"])
    env = {**os.environ, "PYTHONPATH": str(work / "src" / tree) if tree else "", "PYTHONWARNINGS": "ignore"}
    payload = json.dumps({**job, "user_flags": MEGATRON_USER_FLAGS})
    try:
        done = subprocess.run([str(py), "-c", CHILD], input=payload, capture_output=True, text=True, env=env,
                              timeout=600)
    except subprocess.TimeoutExpired:
        return {"ok": False, "stage": "timeout", "error": "no answer in 600 s"}
    for line in done.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    # a parser that exits (tyro's usage box, argparse's error line): its message, not the box border
    lines = [ln.strip(" │╭╮╰╯─") for ln in done.stderr.splitlines()]
    said = [ln for ln in lines if ln and any(w in ln for w in ("rror", "Unrecognized", "invalid", "required"))]
    tail = " / ".join(said[:2]) if said else (lines or ["(no output)"])[-1]
    return {"ok": False, "stage": "parser exit", "error": f"exit {done.returncode}: {tail}"}


# Megatron-Bridge's ConfigContainer groups -> (source tree, file, class) whose dataclass fields (and their bases')
# are the keys an override may set. Megatron-Core's configs are read from the Megatron-LM main tree.
BRIDGE_FIELDS = {
    "model": [("megatron-main", "megatron/core/transformer/transformer_config.py", "TransformerConfig"),
              ("megatron-main", "megatron/core/model_parallel_config.py", "ModelParallelConfig"),
              ("megatron-bridge", "src/megatron/bridge/models/gpt_provider.py", "GPTModelProvider")],
    "ddp": [("megatron-main", "megatron/core/distributed/distributed_data_parallel_config.py",
             "DistributedDataParallelConfig"),
            ("megatron-bridge", "src/megatron/bridge/training/config.py", "DistributedDataParallelConfig")],
    "optimizer": [("megatron-main", "megatron/core/optimizer/optimizer_config.py", "OptimizerConfig")],
    "train": [("megatron-main", "megatron/training/config/training_config.py", "TrainingConfig"),
              ("megatron-bridge", "src/megatron/bridge/training/config.py", "TrainingConfig")],
    "dataset": [("megatron-bridge", "src/megatron/bridge/data/builders/gpt_sft.py", "GPTSFTDatasetConfig")],
    "checkpoint": [("megatron-main", "megatron/training/config/training_config.py", "CheckpointConfig"),
                   ("megatron-bridge", "src/megatron/bridge/training/config.py", "CheckpointConfig")],
    "peft": [("megatron-bridge", "src/megatron/bridge/peft/lora.py", "LoRA")],
}


def _dataclass_fields(path: Path, cls: str) -> set[str]:
    import ast
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return set()


def bridge_check(work: Path, job: dict) -> dict:
    """The Megatron-Bridge LoRA job, read against its source: run_recipe.py takes --model and --mode lora, every
    KEY=VALUE override names a field of its group's dataclass, mixed_precision a registered recipe."""
    import re
    src = {"megatron-bridge": work / "src" / "megatron-bridge", "megatron-main": work / "src" / "megatron-main"}
    runner = (src["megatron-bridge"] / "scripts/training/run_recipe.py").read_text()
    if "--mode lora" not in job["command"] or not re.search(r'choices=\["pretrain", "sft", "lora", "dora"\]', runner):
        return {"ok": False, "stage": "run_recipe.py", "error": "not a run_recipe.py --mode lora job"}
    recipes = set(re.findall(r"@register\ndef ([a-z0-9_]+)\(", (src["megatron-bridge"] /
                                                             "src/megatron/bridge/training/mixed_precision.py").read_text()))
    bad = []
    for item in job["overrides"]:
        key, _, value = item.partition("=")
        group, _, field = key.partition(".")
        if group == "mixed_precision" and not field:
            ok = value in recipes
        else:
            names = set().union(*(_dataclass_fields(src[t] / f, c) for t, f, c in BRIDGE_FIELDS.get(group, [])))
            ok = field in names
        if not ok:
            bad.append(item)
    if bad:
        return {"ok": False, "stage": "ConfigContainer fields", "error": "unknown: " + " ".join(bad[:6])}
    return {"ok": True, "stage": "-", "detail": f"{len(job['overrides'])} overrides, all ConfigContainer fields"}


# ------------------------------------------------------------------------------------------ snapshots

SNAPSHOT_CHILD = r'''
import argparse, dataclasses, json, sys, typing, warnings
warnings.filterwarnings("ignore")
if not hasattr(typing, "override"):
    import typing_extensions
    typing.override = typing_extensions.override
kind = sys.argv[1]
if kind in ("megatron", "megatron-deepspeed"):
    if kind == "megatron":
        import megatron.training.arguments as A
    else:
        import megatron.arguments as A       # Megatron-DeepSpeed keeps the pre-2024 layout
    seen = []
    real = argparse.ArgumentParser.parse_known_args
    def grab(self, *a, **k):
        seen.append(self)
        return real(self, *a, **k)
    argparse.ArgumentParser.parse_known_args = grab
    sys.argv = ["pretrain_gpt.py"]
    A.parse_args(ignore_unknown_args=True)
    flags = {}
    for action in seen[0]._actions:
        for name in action.option_strings:
            kind_ = type(action).__name__.removeprefix("_").removesuffix("Action").lower()
            entry = {"action": kind_}
            if action.choices is not None:
                entry["choices"] = sorted(str(getattr(c, "name", c)) for c in action.choices)
            if action.nargs not in (None, 0):
                entry["nargs"] = str(action.nargs)
            if getattr(action.type, "__name__", None) in ("int", "float", "str"):
                entry["type"] = action.type.__name__
            flags[name] = entry
    print(json.dumps({"flags": dict(sorted(flags.items()))}))
elif kind == "deepspeed":
    import deepspeed
    import deepspeed.runtime.constants as C
    import deepspeed.runtime.zero.config as Z
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from deepspeed.runtime.zero.offload_config import DeepSpeedZeroOffloadOptimizerConfig, DeepSpeedZeroOffloadParamConfig
    def names(model):
        return sorted({f.alias or n for n, f in model.model_fields.items()})
    top = sorted({v for mod in (C, Z) for k, v in vars(mod).items()
                  if k.isupper() and isinstance(v, str) and v.isidentifier() and v.islower()})
    # keys DeepSpeedConfig reads by literal rather than through a constant (sequence_parallel_size)
    import inspect, re
    from deepspeed.runtime import config as R
    top = sorted(set(top) | set(re.findall(r'config\["([a-z_]+)"\]', inspect.getsource(R.DeepSpeedConfig))))
    # and the keys deepspeed.initialize reads itself (data_parallel_size with sequence_parallel_size: the mesh)
    top = sorted(set(top) | set(re.findall(r'config\["([a-z_]+)"\]', inspect.getsource(deepspeed.initialize))))
    print(json.dumps({"keys": top, "zero_optimization": names(DeepSpeedZeroConfig),
                      "offload_optimizer": names(DeepSpeedZeroOffloadOptimizerConfig),
                      "offload_param": names(DeepSpeedZeroOffloadParamConfig)}))
else:
    def fields(cls, prefix, out):
        for f in dataclasses.fields(cls):
            t = f.type if not isinstance(f.type, str) else typing.get_type_hints(cls).get(f.name, f.type)
            if dataclasses.is_dataclass(t):
                fields(t, f"{prefix}{f.name}.", out)
            else:
                out.append(prefix + f.name)
        return out
    if kind == "torchtitan-v0.2.2":
        from torchtitan.config.job_config import JobConfig
        print(json.dumps({"keys": sorted(fields(JobConfig, "", []))}))
    else:
        from torchtitan.config.configs import ParallelismConfig, TrainingConfig
        keys = fields(ParallelismConfig, "parallelism.", []) + fields(TrainingConfig, "training.", [])
        print(json.dumps({"keys": sorted(keys)}))
'''


def snapshot(py: Path, work: Path, data: dict) -> None:
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    deepspeed = {"name": "deepspeed", "framework": "deepspeed", "repo": "deepspeedai/DeepSpeed (PyPI)",
                 "commit": data["deepspeed"]["requirement"], "version": data["deepspeed"]["requirement"].split("==")[-1]}
    for rel in [*data["release"], deepspeed]:
        if rel["framework"] == "megatron-bridge":       # no option list of its own: its keys are dataclass fields
            continue
        kind = rel["framework"] if rel["framework"].startswith("megatron") else rel["name"]    # "deepspeed": the wheel
        env = {**os.environ, "PYTHONPATH": str(work / "src" / rel["name"])}
        done = subprocess.run([str(py), "-c", SNAPSHOT_CHILD, kind], capture_output=True, text=True, env=env,
                              timeout=600, check=True)
        body = json.loads(done.stdout.strip().splitlines()[-1])
        doc = {"generated_by": "benchmarks/validate_exports.py --snapshot", "repo": rel["repo"], "commit": rel["commit"],
               "version": rel["version"], **body}
        path = SNAPSHOTS / f"{rel['name']}.json"
        path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
        print(f"wrote {path.relative_to(ROOT)} ({len(body.get('flags', body.get('keys', [])))} names)")


# ------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", default=str(ROOT / ".validate"), help="venv, source trees and results")
    ap.add_argument("--mirror", action="append", default=[], metavar="OWNER/NAME=GIT_DIR",
                    help="use a local git directory instead of cloning from GitHub")
    ap.add_argument("--snapshot", action="store_true", help="also write tests/data/frameworks/*.json")
    ap.add_argument("--only", help="run the scenarios whose name contains this")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON too")
    ap.add_argument("--checks", help="run only the checks whose name starts with one of these (comma-separated, "
                                     "e.g. megatron,deepspeed,hf)")
    args = ap.parse_args(argv)
    data = tomllib.loads(DATA.read_text())
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    py = setup(work, data, dict(m.split("=", 1) for m in args.mirror))
    if args.snapshot:
        snapshot(py, work, data)
    if args.only:
        data["scenario"] = [s for s in data["scenario"] if args.only in s["name"]]
    rows = []
    jobs = exports(data)
    if args.checks:
        jobs = [j for j in jobs if j["check"] == "-" or j["check"].startswith(tuple(args.checks.split(",")))]
    for job in jobs:
        res = check(py, work, job)
        rows.append({**{k: job.get(k) for k in ("scenario", "layout", "check")}, **res})
        mark = "accepted" if res["ok"] else "-" if res["ok"] is None else "REFUSED"
        print(f"{job['scenario']:<32} {job['check']:<22} {mark:<9} {res.get('detail') or res.get('error', '')}",
              flush=True)
    print()
    print("| scenario | layout | check | verdict | detail / verbatim error |")
    print("|---|---|---|---|---|")
    for r in rows:
        verdict = "accepted" if r["ok"] else "-" if r["ok"] is None else f"**refused** at {r['stage']}"
        print(f"| {r['scenario']} | {r['layout']} | {r['check']} | {verdict} | {r.get('detail') or r.get('error', '')} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["ok"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
