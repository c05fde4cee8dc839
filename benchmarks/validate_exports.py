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
        tops = {"torchtitan": ["torchtitan"], "megatron-deepspeed": ["megatron", "tools"]}.get(rel["framework"],
                                                                                            ["megatron"])
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
                                      ("precision", sc.get("precision"))) if v is not None}
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
        if layout.framework != "torchtitan":       # the same layout under torchtitan, when its audit is ok
            twin = advisor.audit(cluster, model, layout.model_copy(update={"framework": "torchtitan", "etp": 1
                                                                            if layout.ep > 1 else None}), training)
            if twin.ok:
                targets.append((twin.layout, "torchtitan"))
        for lay, fw in targets:
            row = {**base, "layout": lay.id, "dp": lay.dp, "framework": lay.framework}
            if fw == "megatron+deepspeed":      # its own parser: microsoft/Megatron-DeepSpeed at the pin
                jobs.append({**row, "check": "megatron-deepspeed", "env": {},
                             "args": ex.megatron_args(lay, model, training, cluster, A)})
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
                jobs.append({**row, "check": "deepspeed", "config": ex.deepspeed_config(lay, model, training, cluster, A),
                             "mpu_dp": lay.dp if fw != "deepspeed" else None, "engine": lay.offload != "none"})
            if fw == "torchtitan":
                moe = model.is_moe
                jobs.append({**row, "check": "torchtitan-main", "moe": moe,
                             "args": ex.torchtitan_args(lay, model, training, cluster, A)})
                jobs.append({**row, "check": "torchtitan-v0.2.2", "moe": moe,
                             "toml": ex.torchtitan_toml(lay, model, training, cluster, A)})
    return jobs


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
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    stage = "fake process group"
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=job["gpus"])
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
    if "args" not in job and "config" not in job and "toml" not in job:
        return {"ok": None, "stage": "-", "error": job["result"]}
    tree = {"megatron-main": "megatron-main", "megatron-core_v0.16.1": "megatron-core_v0.16.1",
            "megatron-deepspeed": "megatron-deepspeed",
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
    for job in exports(data):
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
