"""`advisor completion bash|zsh`: a script written from the parser, so every option completes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from advisor.cli import main

BASH = shutil.which("bash")


def _script(shell: str, capsys) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _complete(script: str, words: list[str]) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    run = f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _advisor; printf "%s\\n" "${{COMPREPLY[@]}}"'
    out = subprocess.run([BASH, "-c", run], capture_output=True, text=True, check=True).stdout
    return out.split()


@pytest.mark.skipif(BASH is None, reason="no bash here")
def test_bash_completes_commands_options_choices_and_presets(capsys):
    script = _script("bash", capsys)
    assert _complete(script, ["advisor", "rec"]) == ["recommend"]
    assert "--precision" in _complete(script, ["advisor", "recommend", "--pre"])
    assert set(_complete(script, ["advisor", "recommend", "--format", ""])) >= {"megatron", "deepspeed", "peft"}
    assert _complete(script, ["advisor", "audit", "--model", "llama-3.1-4"]) == ["llama-3.1-405b"]
    assert _complete(script, ["advisor", "completion", "z"]) == ["zsh"]


def test_zsh_loads_it_through_bashcompinit(capsys):
    script = _script("zsh", capsys)
    assert script.startswith("autoload -U +X bashcompinit && bashcompinit")
    assert "complete -o default -F _advisor advisor" in script
