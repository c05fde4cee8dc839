"""The built wheel ships the rule files inside the package, and a non-editable install uses them."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # --no-isolation: build with the hatchling already installed (the test extra), no download.
    # ADVISOR_PURE_BUILD: the pure-Python wheel (compiling takes a minute of CPU; the compiled one is
    # checked on demand, every golden scenario byte for byte: benchmarks/compiled.py), so Cython and
    # setuptools, which only compiling needs, need not be installed (--skip-dependency-check).
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
                           "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, env={**os.environ, "ADVISOR_PURE_BUILD": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = out.glob("advisor-*.whl")
    return path


def test_wheel_contains_every_rule_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for rule_file in (REPO / "rules").glob("*.toml"):
        assert f"advisor/rules/{rule_file.name}" in names
    assert "advisor/inputs/units_en.txt" in names
    assert "advisor/inputs/presets/gpus.toml" in names and "advisor/inputs/presets/models.toml" in names


def test_non_editable_install_loads_packaged_rules(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import advisor, advisor.rulebook.load as rb;"
        "root = rb.builtin_rules_dir();"
        f"assert str(root).startswith({str(site)!r}), root;"
        "rec = advisor.recommend({'gpu': 'A100-80GB', 'gpus': 16}, 'llama-2-7b');"
        "print(advisor.__file__, rec.layout.id, len(rb.builtin_rulebook().rules))"
    )
    # -P: do not put the working directory first; the extracted wheel shadows the editable checkout.
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert str(site) in done.stdout
