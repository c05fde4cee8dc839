"""Build the shipped profile from the released H200 measurements.

    python benchmarks/build_profile.py [DATA_DIR] [--check]

DATA_DIR defaults to ../shared/data/measured-h200-2026-12 (beside the repository). Writes
advisor/profiles/h200-2026-12.json from its microbench.jsonl and realruns.jsonl (section graphs)
and from this repository's own measurement of the same kind of machine,
benchmarks/measured/h200-2026-12-04/records.jsonl (`advisor measure` on a lent H200; its README),
with advisor.measure.build; --check only compares the result with the committed file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.inputs import presets  # noqa: E402
from advisor.inputs.profile import SHIPPED  # noqa: E402
from advisor.inputs.specs import GPU  # noqa: E402
from advisor.measure.build import build_profile  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "data" / "measured-h200-2026-12"
OWN = ROOT / "benchmarks" / "measured" / "h200-2026-12-04" / "records.jsonl"
OUT = ROOT / "advisor" / "profiles" / f"{SHIPPED}.json"


def records(data: Path) -> list[dict]:
    rows = [json.loads(line) for line in (data / "microbench.jsonl").read_text().splitlines() if line.strip()]
    runs = data / "realruns.jsonl"
    if runs.exists():
        rows += [r for r in (json.loads(line) for line in runs.read_text().splitlines() if line.strip())
                 if r.get("section") == "graphs"]
    own = [json.loads(line) for line in OWN.read_text().splitlines() if line.strip()]
    return rows + [r for r in own if r.get("section") != "env"]


def source(rows: list[dict]) -> str:
    env = next((r for r in rows if r.get("section") == "env"), {})
    return (f"measured on one {env.get('device', '?')} ({env.get('sms', '?')} SMs, max SM clock "
            f"{env.get('smi_clocks.max.sm', '?')}, power limit {env.get('smi_power.limit', '?')}, driver "
            f"{env.get('smi_driver_version', '?')}), CUDA {env.get('cuda', '?')}, cuDNN {env.get('cudnn', '?')}, "
            f"PyTorch {env.get('torch', '?')}, host CPU {env.get('cpu_model', '?')} ({env.get('cores', '?')} cores), "
            "2026-12-04; scripts and raw rows: shared data measured-h200-2026-12 (method/microbench.py, "
            "method/realruns2.py) and benchmarks/measured/h200-2026-12-04 (advisor measure, same kind of machine), "
            "built by benchmarks/build_profile.py")


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    data = Path(args[0]) if args else DEFAULT
    rows = records(data)
    prof = build_profile(rows, name=SHIPPED, gpu=GPU(**presets.gpu("H200")), source=source(rows))
    text = json.dumps(prof.model_dump(mode="json"), indent=1, sort_keys=True) + "\n"
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text() == text
        print("profile up to date" if same else f"{OUT.relative_to(ROOT)} differs from a fresh build")
        return 0 if same else 1
    OUT.write_text(text)
    h = prof.host
    print(f"wrote {OUT.relative_to(ROOT)}: elementwise {prof.elementwise:.2f} B/B, host {h.eager_layer * 1e3:.2f} ms "
          f"/ {h.eager_layer_recompute * 1e3:.2f} ms per layer (recompute), {h.per_kernel * 1e6:.1f} us per kernel "
          f"({h.eager_kernels:.0f} kernels per layer)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
