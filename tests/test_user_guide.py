"""Every code block of docs/user-guide.md runs (issue 36): the python blocks statement by statement in
one session, as a reader would type them (a statement whose next line shows an exception must raise
it); the `$ advisor ...` and `advisor ...` lines of the console and bash blocks through the CLI in
process, with the exit status the guide shows (an `advisor: error:` shown is exit 2, `$ echo $?` its
number, else 0 or 1, never 3); the toml and json blocks parse.

What the lines print is docs/check_guide.py's to compare (estimates move with the cost model; the
guide is trimmed output, not a golden file). A few lines cannot run here, each named in SKIP with why.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shlex
import shutil
import sys
import tomllib
import types
from pathlib import Path

import pytest

from advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
sys.path.insert(0, str(ROOT / "docs"))
from check_guide import FIXTURES  # noqa: E402  (the files the guide's commands name)

sys.path.pop(0)

# Lines that cannot run in a test, and why (the rest of their block still runs).
SKIP = {
    "pip install": "installs the package",
    "advisor measure": "needs a GPU and minutes (tests/test_measure.py runs its --smoke path)",
    "torchrun": "launches processes on a GPU node",
}
# An exception a statement's next comment line shows: "# advisor.errors.InputError: ..."
_RAISES = re.compile(r"^#\s*(?:[\w.]+\.)?(\w+(?:Error|Exception))\b")


def _blocks(kind: str) -> list[tuple[int, str]]:
    return [(GUIDE[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(rf"```{kind}\n(.*?)```", GUIDE, flags=re.S)]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder holding the files the guide names: the check script's fixtures, the example site
    policy, a profile for `--profile h100-site.json` (the shipped one), and the repository's tests/
    and docs/ for paths the guide gives from the repository root."""
    for name, content in FIXTURES.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    shutil.copy(ROOT / "docs" / "examples" / "site-policy.toml", tmp_path / "site-policy.toml")
    shutil.copy(next((ROOT / "advisor" / "profiles").glob("*.json")), tmp_path / "h100-site.json")
    for folder in ("tests", "docs"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    return tmp_path


def _run_cli(command: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(shlex.split(command)[1:])
    return code, out.getvalue() + err.getvalue()


def _console_commands() -> list[tuple[int, str, str]]:
    """(line, command, what the guide shows after it) for every `$ advisor ...`."""
    found = []
    for line, block in _blocks("console"):
        parts = re.split(r"^\$ (.*)$", block, flags=re.M)
        for cmd, shown in zip(parts[1::2], parts[2::2]):
            if cmd.startswith("advisor "):
                status = re.match(r"\$ echo \$\?\n(\d+)", "$" + shown.split("\n$", 1)[1]) if "\n$ echo $?" in shown \
                    else None
                found.append((line, cmd, shown if status is None else shown + f"\n<exit {status.group(1)}>"))
    return found


@pytest.mark.parametrize("line, command, shown", _console_commands(),
                         ids=[f"line{line}-{cmd.split()[1]}" for line, cmd, _ in _console_commands()])
def test_console_command_runs_as_shown(workdir, line, command, shown):
    code, printed = _run_cli(command)
    assert code != 3, f"user-guide.md:{line}: {command}\n{printed}"
    exit_shown = re.search(r"<exit (\d+)>", shown)
    if exit_shown:
        assert code == int(exit_shown.group(1)), f"user-guide.md:{line}: {command}: exit {code}\n{printed}"
    elif "advisor: error:" in shown:
        assert code == 2, f"user-guide.md:{line}: {command}: exit {code}\n{printed}"
    else:
        assert code in (0, 1) and "advisor: error" not in printed, f"user-guide.md:{line}: {command}\n{printed}"


def _bash_lines() -> list[tuple[int, str]]:
    return [(line, text.split("#")[0].strip()) for line, block in _blocks("bash") for text in block.splitlines()
            if text.strip() and not any(skip in text for skip in SKIP)]


@pytest.mark.parametrize("line, command", _bash_lines(), ids=[f"line{line}" for line, _ in _bash_lines()])
def test_bash_line_runs(workdir, line, command):
    assert command.startswith("advisor "), f"user-guide.md:{line}: a bash line the test cannot run: {command}"
    code, printed = _run_cli(command)
    assert code == 0, f"user-guide.md:{line}: {command}\n{printed}"


def test_skipped_lines_are_few_and_named():
    skipped = [text for _line, block in _blocks("bash") for text in block.splitlines()
               if any(skip in text for skip in SKIP)]
    assert 0 < len(skipped) <= 4, skipped


def _statements(block: str) -> list[tuple[str, str | None]]:
    """(source, the exception the next line shows or None) for each top-level statement."""
    lines = block.splitlines()
    out = []
    for node in ast.parse(block).body:
        source = "\n".join(lines[node.lineno - 1:node.end_lineno])
        after = lines[node.end_lineno].strip() if node.end_lineno < len(lines) else ""
        raises = _RAISES.match(after)
        out.append((source, raises.group(1) if raises else None))
    return out


def test_python_blocks_run_in_one_session(workdir):
    """The blocks in order, sharing names (a later block uses `rec` from the first), in a module
    of their own so that the service example's worker processes can unpickle its functions."""
    shown_raising = [raises for _line, block in _blocks("python") for _s, raises in _statements(block) if raises]
    assert len(shown_raising) >= 3            # the guide's error examples are run too, not skipped
    session = types.ModuleType("advisor_user_guide")
    session.__file__ = str(workdir / "test_site_policy.py")     # the site-rule tests' SITE is beside it
    sys.modules[session.__name__] = session
    try:
        for line, block in _blocks("python"):
            for source, raises in _statements(block):
                where = f"user-guide.md:{line}: {source.splitlines()[0]}"
                if raises is None:
                    exec(compile(source, where, "exec"), session.__dict__)
                    continue
                with pytest.raises(Exception) as info:
                    exec(compile(source, where, "exec"), session.__dict__)
                assert raises in {cls.__name__ for cls in type(info.value).__mro__}, (where, info.value)
        pool = session.__dict__.get("pool")
        if pool is not None:
            pool.shutdown()
    finally:
        del sys.modules[session.__name__]


@pytest.mark.parametrize("kind", ["toml", "json"])
def test_data_blocks_parse(kind):
    blocks = _blocks(kind)
    assert blocks
    for line, block in blocks:
        try:
            tomllib.loads(block) if kind == "toml" else json.loads(block)
        except ValueError as exc:
            pytest.fail(f"user-guide.md:{line}: {exc}")


def test_the_guide_shows_compare_custom_gpus_and_the_network():
    commands = [cmd for _line, cmd, _shown in _console_commands()]
    assert any(cmd.startswith("advisor compare ") for cmd in commands)
    assert any("--gpu-spec" in cmd for cmd in commands) and "advisor.GPU(" in GUIDE
    assert any("--inter-node-bandwidth" in cmd for cmd in commands)
