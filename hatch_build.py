"""The wheel's build hook: the search's hot modules compiled with Cython, their source unchanged.

Cython compiles these modules as they are written (language level 3, annotations read as
documentation, not as C types), so each computes what its .py computes, float for float:
`python benchmarks/compiled.py` builds both wheels and checks every golden scenario byte for byte.
The .py files ship beside the extensions (Python imports the extension; tracebacks and readers
see the source). Pure Python instead, with the same answers:
- editable installs (`pip install -e .`, the tests): an edit takes effect at once, and no stale
  extension can shadow it;
- ADVISOR_PURE_BUILD=1, or a build without Cython or a C compiler (a warning says so).
Why, measured (docs/user-guide.md, "Speed"): a recommendation spends most of its time in these
modules; compiled, the large searches take 16-27% less CPU, the small ones about the same.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _build_info(root: Path):
    """advisor/build_info.py (COMPILED, extension_path), loaded without importing advisor (its
    dependencies are not installed where the wheel is built)."""
    spec = importlib.util.spec_from_file_location("_advisor_build_info", root / "advisor" / "build_info.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: -O1: as fast as -O2 here and half its compile time; -O0 ran slower than pure Python (dev VM,
#: 2026-12-05, compared by hand on the first 16 modules; benchmarks/compiled.py times the flags set here). -ffp-contract=off: no fused multiply-add, so every float is rounded where
#: CPython rounds it, on every architecture. -g0: no debug information (it made the wheel 7 MB).
CFLAGS = ("-O1", "-ffp-contract=off", "-g0")

PURE_ENV = "ADVISOR_PURE_BUILD"


class CompiledModules(BuildHookInterface):
    """Adds the compiled modules (advisor/build_info.py's COMPILED) to a standard (non-editable) wheel."""

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable" or os.environ.get(PURE_ENV) == "1":
            return
        self._tmp = tempfile.mkdtemp(prefix="advisor-cython-")
        try:
            built = _compile(Path(self.root), Path(self._tmp))
        except Exception as exc:  # noqa: BLE001 - any failure to compile leaves the pure-Python wheel
            self.app.display_warning(f"advisor: compiling the hot modules failed ({type(exc).__name__}: "
                                     f"{str(exc)[:300]}); building a pure-Python wheel (same answers, slower)")
            return
        for wheel_path, file in built.items():
            build_data["force_include"][str(file)] = wheel_path
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _compile(root: Path, tmp: Path) -> dict[str, Path]:
    """{path in the wheel: built extension} of every module build_info.COMPILED lists."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    flags = [] if sys.platform == "win32" else list(CFLAGS)
    info = _build_info(root)
    compiled = info.COMPILED
    sources = []
    for rel in compiled:
        copy = tmp / "src" / rel          # compiled from a copy: no generated file lands in the tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, copy)
        sources.append(Extension(rel[:-3].replace("/", "."), [str(copy)], extra_compile_args=flags))
    extensions = cythonize(sources, quiet=True, compiler_directives={"language_level": 3, "annotation_typing": False})
    command = build_ext(Distribution({"ext_modules": extensions}))
    command.build_lib, command.build_temp = str(tmp / "lib"), str(tmp / "tmp")
    command.parallel = os.cpu_count() or 1
    command.ensure_finalized()
    command.run()
    built = {}
    for rel in compiled:
        wheel_path = info.extension_path(rel)
        file = tmp / "lib" / wheel_path
        if not file.is_file():
            raise FileNotFoundError(f"no extension built for {rel}")
        built[wheel_path] = file
    return built
