"""The compiled wheel against pure Python: the same answers, and how much faster (issue 34). On demand.

    python benchmarks/compiled.py [--rounds N] [--no-isolation]

Builds the standard wheel (hatch_build.py compiles advisor/build_info.py's COMPILED modules with Cython; the build
downloads Cython unless --no-isolation), unpacks it, then in fresh processes, one importing the
unpacked wheel and one this checkout's pure-Python source:
1. every golden scenario (tests/golden/regenerate.py's list), its whole result as JSON with every
   float in full: the two must be equal byte for byte (exit 1 otherwise, naming the scenarios);
2. recommend for benchmarks/perf.py's scenarios and Mixtral-8x7B on 64 H100 at 32k (service.py's
   slowest), warm, CPU time per call: the median over rounds that run the two builds in turn, the
   first alternating (pure, compiled; compiled, pure; ...), as this VM's speed drifts by up to 1.8x
   within minutes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

from advisor.build_info import COMPILED, compiled_modules

REPO = Path(__file__).resolve().parents[1]

# Run in a child: prints one JSON line. argv[1]: "answers" or "times:<repeat>".
CHILD = r"""
import hashlib, json, statistics, sys, time
import advisor, advisor.costmodel.time as t
what = sys.argv[1]
sys.path.append(sys.argv[2])
if what == "answers":
    from golden.regenerate import all_goldens
    out = {name: hashlib.sha256(json.dumps(make(), sort_keys=True, default=str).encode()).hexdigest()
           for name, make in sorted(all_goldens().items())}
    print(json.dumps({"build": t.__file__, "answers": out}))
else:
    from perf import SCENARIOS
    from advisor import Cluster, Training
    cases = list(SCENARIOS) + [("Mixtral-8x7B on 64 H100 at 32k", Cluster(gpu="H100-SXM-80GB", gpus=64),
                                "mixtral-8x7b", Training(seq_len=32768, global_batch_size=512))]
    repeat = int(what.split(":")[1])
    times = {}
    for name, c, m, tr in cases:
        advisor.recommend(c, m, tr)
        samples = []
        for _ in range(repeat):
            t0 = time.process_time()
            advisor.recommend(c, m, tr)
            samples.append(time.process_time() - t0)
        times[name] = statistics.median(samples)
    print(json.dumps({"build": t.__file__, "times": times}))
"""


def _wheel(out: Path, isolated: bool) -> Path:
    env = dict(os.environ)
    env.pop("ADVISOR_PURE_BUILD", None)
    args = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)]
    if not isolated:
        args.insert(4, "--no-isolation")
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"building the wheel failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    (path,) = out.glob("advisor-*.whl")
    return path


def _child(path: Path, what: str, cwd: Path) -> dict:
    extra = REPO / "tests" if what == "answers" else REPO / "benchmarks"
    env = {"PYTHONPATH": str(path), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CI": "true"}
    done = subprocess.run([sys.executable, "-P", "-c", CHILD, what, str(extra)], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"child ({path}, {what}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _differing_answers(site: Path, tmp: Path) -> list[str]:
    """The golden scenarios whose whole result differs between the pure and the compiled build."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    pure, compiled = _child(REPO, "answers", tmp), _child(site, "answers", tmp)
    assert compiled["build"].endswith(suffix) and pure["build"].endswith(".py"), (pure["build"], compiled["build"])
    differ = [name for name in pure["answers"] if pure["answers"][name] != compiled["answers"].get(name)]
    total = len(pure["answers"])
    print(f"golden scenarios: {total}, identical to the last bit: {total - len(differ)}")
    for name in differ:
        print(f"  DIFFERS: {name}")
    return differ


def _print_times(site: Path, tmp: Path, rounds: int) -> None:
    samples: dict[str, dict[str, list[float]]] = {"pure": {}, "compiled": {}}
    builds = [("pure", REPO), ("compiled", site)]
    for r in range(rounds):
        # the first of a round alternates: the VM's drift within a round then favours neither build
        for label, path in (builds if r % 2 == 0 else builds[::-1]):
            for name, sec in _child(path, "times:15", tmp)["times"].items():
                samples[label].setdefault(name, []).append(sec)
    print(f"recommend, warm, CPU ms per call (median of {rounds} rounds of 15 calls each, the builds in turn):")
    for name in samples["pure"]:
        p, c = statistics.median(samples["pure"][name]), statistics.median(samples["compiled"][name])
        print(f"  {name:<34} pure {p * 1e3:8.2f}   compiled {c * 1e3:8.2f}   ({c / p:.2f}x)")


def main(argv: list[str]) -> int:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        wheel = _wheel(tmp / "dist", isolated="--no-isolation" not in argv)
        site = tmp / "site"
        zipfile.ZipFile(wheel).extractall(site)
        built = compiled_modules(site)
        print(f"wheel {wheel.name}: {len(built)} of {len(COMPILED)} modules compiled")
        if len(built) < len(COMPILED):
            print("  not all compiled (a pure-Python wheel or a partial one: see the build's warning)")
            return 1
        differ = _differing_answers(site, tmp)
        _print_times(site, tmp, rounds)
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
