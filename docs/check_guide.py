"""Re-run the `$ advisor ...` examples in docs/user-guide.md and list shown lines that changed.

    python docs/check_guide.py

Run it after changing the planner, the cost model or the rules, and paste the fresh output into the
guide where it differs. Lines containing "…" are elisions and are not compared. The comparison is not
part of the test suite on purpose: estimates move with every cost-model change, and the guide is
trimmed output, not a golden file. That every block of the guide runs (python, console, bash, toml,
json), with the exit status it shows, is: tests/test_user_guide.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "user-guide.md"

WIDTH = 80

# Files the guide's commands name that are not in the repository: (name, content).
FIXTURES = {
    "bad-config.json": '{"model_type": "llama", "hidden_size": 4096}\n',
    "typo.toml": (ROOT / "docs" / "examples" / "site-policy.toml").read_text(encoding="utf-8")
                 .replace('when = "cluster.gpus >= 256"', 'when = "cluster.gpu >= 256"'),
    # the guide's example prices (capacity planning), the ```toml block after "**Prices.**"
    "prices.toml": re.search(r"\*\*Prices\.\*\*.*?```toml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S).group(1),
    "mi210.toml": (ROOT / "docs" / "examples" / "mi210.toml").read_text(encoding="utf-8"),
}


def main() -> int:
    text = GUIDE.read_text(encoding="utf-8")
    changed = 0
    # the width a terminal has by default: the text output wraps to it (COLUMNS, as the CLI reads it)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               COLUMNS=str(WIDTH))
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in FIXTURES.items():
            Path(tmp, name).write_text(content, encoding="utf-8")
        for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
            parts = re.split(r"^\$ (.*)$", block, flags=re.M)
            for cmd, shown in zip(parts[1::2], parts[2::2]):
                if not cmd.startswith("advisor "):
                    continue
                run = cmd
                for name in FIXTURES:
                    run = re.sub(rf"(?<![\w/.-]){re.escape(name)}", f"{tmp}/{name}", run)
                run = re.sub(r"(?<![\w/.-])site-policy\.toml", "docs/examples/site-policy.toml", run)
                out = subprocess.run(run, shell=True, cwd=ROOT, env=env, capture_output=True, text=True)
                real = {line.rstrip() for line in (out.stdout + out.stderr).replace(f"{tmp}/", "").splitlines()}
                for line in shown.splitlines():
                    if line.strip() and "…" not in line and line.rstrip() not in real:
                        changed += 1
                        print(f"$ {cmd}\n  shown, no longer printed: {line.strip()[:160]}")
    print(f"{changed} shown line(s) differ from what the commands print now")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
