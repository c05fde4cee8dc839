"""The compiled build (hatch_build.py, advisor/build_info.py): what it compiles and when, checked
without compiling (benchmarks/compiled.py builds the wheel and compares every golden scenario)."""

from __future__ import annotations

import ast
import importlib.util
import sysconfig
from pathlib import Path

import pytest

from advisor.build_info import COMPILED, compiled_modules

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
hatch_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hatch_build)          # (hatchling: the test extra)


def test_every_compiled_module_exists_once_and_defines_no_pydantic_model():
    assert len(set(COMPILED)) == len(COMPILED)
    for rel in COMPILED:
        path = REPO / rel
        assert path.is_file() and rel.startswith("advisor/") and rel.endswith(".py"), rel
        assert path.name != "__init__.py", f"{rel}: a package's __init__ stays Python"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        assert "pydantic" not in imported, f"{rel} imports pydantic, which reads annotations at run time"


def test_compiled_modules_are_the_listed_ones_with_an_extension_beside_them(tmp_path):
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert compiled_modules(tmp_path) == ()
    for rel in COMPILED[:2]:
        ext = tmp_path / (rel[:-3] + suffix)
        ext.parent.mkdir(parents=True, exist_ok=True)
        ext.write_bytes(b"")
    (tmp_path / "advisor" / "api.py").with_suffix(suffix).write_bytes(b"")     # not listed: not counted
    assert compiled_modules(tmp_path) == tuple(rel[:-3].replace("/", ".") for rel in COMPILED[:2])


class _App:
    def __init__(self):
        self.warnings = []

    def display_warning(self, message):
        self.warnings.append(message)


def _hook(target="wheel"):
    app = _App()
    hook = hatch_build.CompiledModules(str(REPO), {}, None, None, str(REPO), target, app)
    return hook, app


def _build_data():
    return {"force_include": {}, "pure_python": True, "infer_tag": False}


@pytest.mark.parametrize("version, env, target", [("editable", None, "wheel"), ("standard", "1", "wheel"),
                                                  ("standard", None, "sdist")])
def test_editable_pure_and_sdist_builds_compile_nothing(monkeypatch, version, env, target):
    monkeypatch.setattr(hatch_build, "_compile", lambda root, tmp: pytest.fail("compiled"))
    if env is None:
        monkeypatch.delenv(hatch_build.PURE_ENV, raising=False)
    else:
        monkeypatch.setenv(hatch_build.PURE_ENV, env)
    hook, app = _hook(target)
    data = _build_data()
    hook.initialize(version, data)
    assert data == _build_data() and app.warnings == []


def test_a_failed_compile_leaves_a_pure_wheel_and_says_so(monkeypatch):
    def fail(root, tmp):
        raise RuntimeError("error: command 'gcc' failed: No such file or directory")
    monkeypatch.setattr(hatch_build, "_compile", fail)
    monkeypatch.delenv(hatch_build.PURE_ENV, raising=False)
    hook, app = _hook()
    data = _build_data()
    hook.initialize("standard", data)
    hook.finalize("standard", data, "advisor.whl")
    assert data == _build_data()
    (warning,) = app.warnings
    assert "RuntimeError" in warning and "gcc" in warning and "pure-Python wheel" in warning


def test_a_compiled_build_adds_the_extensions_and_tags_the_wheel_for_its_platform(monkeypatch, tmp_path):
    ext = tmp_path / "time.so"
    ext.write_bytes(b"")
    monkeypatch.setattr(hatch_build, "_compile", lambda root, tmp: {"advisor/costmodel/time.so": ext})
    monkeypatch.delenv(hatch_build.PURE_ENV, raising=False)
    hook, _ = _hook()
    data = _build_data()
    hook.initialize("standard", data)
    assert data == {"force_include": {str(ext): "advisor/costmodel/time.so"}, "pure_python": False, "infer_tag": True}
    hook.finalize("standard", data, "advisor.whl")


def test_the_hook_reads_the_list_from_build_info():
    assert hatch_build._build_info(REPO).COMPILED == COMPILED
