"""Exports escape every string they embed (issue 38): for any name, path or version a caller can
pass, each launch config parses to the same structure as it does for a plain one, and the string
reads back exactly where it was written. The names are put on the objects past validation
(model_copy), so the exporters' own escaping is what is tested; advisor.Model refuses most of them
at the door (tests/test_safe_embed.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import tomllib

from hypothesis import example, given, settings
from hypothesis import strategies as st

from advisor import export as ex
from advisor.inputs.layout import Layout
from advisor.inputs.specs import Cluster, Model, Training
from budget import examples  # tests/ is on sys.path (rootdir conftest)

CLUSTER = Cluster(gpu="H100-SXM-80GB", gpus=64)
MODEL = Model.preset("llama-3-70b")
TRAINING = Training(seq_len=8192, global_batch_size=512)
MEGATRON = Layout(tp=8, pp=2, dp=4, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=128)
TORCHTITAN = Layout(framework="torchtitan", tp=8, pp=2, dp=4, zero_stage=1, micro_batch_size=1, num_microbatches=128)
DEEPSPEED = Layout(framework="deepspeed", dp=64, zero_stage=3, micro_batch_size=1, num_microbatches=8)
LORA = Training(seq_len=4096, global_batch_size=128, task="lora", lora_rank=16, lora_alpha=32,
                lora_targets=("qkv", "proj", "fc1", "fc2"))
HAVE_YAML = importlib.util.find_spec("yaml") is not None

# Every code point but the lone surrogates, which no str from a UTF-8 source holds; NUL only where a
# path cannot hold it anyway is still generated: the escaping must not depend on it being absent.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
HOSTILE = st.sampled_from(["x\n[job]\ndump_folder = '/'", "a\r\nb = 1", "\x1b[2J", "q\"uote", "back\\slash",
                           "nel\x85x", "ls\u2028[checkpoint]", "'$(echo injected)'", "`echo injected`", "$HOME", "${X}", "- a: b",
                           "#", "", " ", "true", "null", "1e3", "\t", "\x7f", "\ufeff", "é", "🙂"])
STRINGS = st.one_of(HOSTILE, TEXT)
EXAMPLES = settings(max_examples=examples(40, thorough=150), deadline=None)


def _named(name: str) -> Model:
    return MODEL.model_copy(update={"name": name})


def _shell_words(command: str) -> list[str]:
    return shlex.split(command.replace("\\\n", " "))


@EXAMPLES
@given(name=STRINGS)
def test_no_name_changes_the_torchtitan_toml(name):
    plain = tomllib.loads(ex.torchtitan_toml(TORCHTITAN, MODEL, TRAINING, CLUSTER))
    assert tomllib.loads(ex.torchtitan_toml(TORCHTITAN, _named(name), TRAINING, CLUSTER)) == plain


@EXAMPLES
@given(name=STRINGS)
def test_no_name_changes_a_shell_command(name):
    for export in (lambda m: ex.megatron_command(MEGATRON, m, TRAINING, CLUSTER),
                   lambda m: ex.torchtitan_config(TORCHTITAN, m, TRAINING, CLUSTER, version="main")):
        assert _shell_words(export(_named(name))) == _shell_words(export(MODEL))


@EXAMPLES
@given(name=STRINGS)
def test_no_name_changes_a_json_export(name):
    assert ex.deepspeed_config(DEEPSPEED, _named(name), TRAINING, CLUSTER) == \
        ex.deepspeed_config(DEEPSPEED, MODEL, TRAINING, CLUSTER)
    assert json.loads(ex.peft_config(_named(name), LORA)) == json.loads(ex.peft_config(MODEL, LORA))


_ENV = {"PATH": "", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "JOB_ID": "job7"}
_PLACEHOLDER = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")


def _run(command: str) -> list[str]:
    """The words `sh` passes to torchrun for `command`: torchrun replaced by the printf builtin, an
    empty PATH so that nothing but builtins could run whatever a failed escape let through."""
    script = command.replace("torchrun", "printf '%s\\0'", 1)
    done = subprocess.run([SH, "-c", script], env=_ENV, capture_output=True, check=True)
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


def _expanded(value: str) -> str:
    return _PLACEHOLDER.sub(lambda m: _ENV.get(m.group(1) or m.group(2), ""), value)


SH = shutil.which("sh") or "/bin/sh"
NO_NUL = STRINGS.filter(lambda s: "\0" not in s)     # no argv or path holds a NUL


@EXAMPLES
@given(script=NO_NUL, args=st.lists(NO_NUL, max_size=3), endpoint=NO_NUL, job=NO_NUL)
@example(script="a b", args=["c;d"], endpoint="$(echo injected)", job='q"uote; echo injected')
@example(script="x", args=[], endpoint="`echo injected`:$MASTER_PORT", job="${JOB_ID}-$HOME")
def test_a_shell_reads_paths_and_rendezvous_values_back_as_one_word_each(script, args, endpoint, job):
    """torchrun's script and its arguments are single words; the rendezvous values keep their
    $NAME placeholders for the shell and nothing else of them is interpreted ("$(...)" ran a
    command when the value was written in double quotes unescaped)."""
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=16)
    words = _run(ex.torchrun_command(cluster, script=script, script_args=args, rdzv_endpoint=endpoint, rdzv_id=job))
    assert words == ["--nnodes=2", "--nproc-per-node=8", f"--rdzv-id={_expanded(job)}", "--rdzv-backend=c10d",
                     f"--rdzv-endpoint={_expanded(endpoint)}", script, *args]
    plain = _shell_words(ex.megatron_command(MEGATRON, MODEL, TRAINING, CLUSTER))
    with_script = _shell_words(ex.megatron_command(MEGATRON, MODEL, TRAINING, CLUSTER, script=script))
    assert with_script == [script if w == "pretrain_gpt.py" else w for w in plain]


def _yaml_lines(text: str) -> list[str]:
    """The accelerate config's lines that are not comments: its keys, whatever a value holds."""
    return [line.split(":", 1)[0] for line in text.splitlines() if not line.lstrip().startswith("#")]


@EXAMPLES
@given(path=STRINGS)
def test_no_path_changes_the_accelerate_yaml(path):
    plain = ex.accelerate_config(DEEPSPEED, MODEL, TRAINING, CLUSTER)
    text = ex.accelerate_config(DEEPSPEED, MODEL, TRAINING, CLUSTER, deepspeed_json=path)
    assert _yaml_lines(text) == _yaml_lines(plain) and len(text.splitlines()) == len(plain.splitlines())
    if HAVE_YAML:
        import yaml

        doc = yaml.safe_load(text)
        assert doc["deepspeed_config"].pop("deepspeed_config_file") == path
        want = yaml.safe_load(plain)
        want["deepspeed_config"].pop("deepspeed_config_file")
        assert doc == want


@EXAMPLES
@given(version=STRINGS)
def test_no_version_changes_an_export(version):
    """A framework_version is a fact the rules read, never written into a launch config; one the
    input refuses is an InputError naming it."""
    try:
        training = TRAINING.model_copy(update={"framework": "megatron-core"})
        training = Training(**{**training.model_dump(), "framework_version": version})
    except ValueError as exc:
        assert "Training.framework_version" in str(exc)
        return
    assert _shell_words(ex.megatron_command(MEGATRON, MODEL, training, CLUSTER)) == \
        _shell_words(ex.megatron_command(MEGATRON, MODEL, TRAINING, CLUSTER))
    assert tomllib.loads(ex.torchtitan_toml(TORCHTITAN, MODEL, training, CLUSTER)) == \
        tomllib.loads(ex.torchtitan_toml(TORCHTITAN, MODEL, TRAINING, CLUSTER))


def test_the_injection_the_probe_found_leaves_the_tables_unchanged():
    """The torchtitan v0.2.2 export wrote the name into a comment unescaped: a newline in it added
    real [job] and [checkpoint] tables, and the CLI exited 0."""
    name = "llama\n[job]\ndump_folder = \"/etc\"\n[checkpoint]\nenable_checkpoint = true\n#"
    doc = tomllib.loads(ex.torchtitan_toml(TORCHTITAN, _named(name), TRAINING, CLUSTER))
    assert set(doc) == {"parallelism", "training", "activation_checkpoint"}


def test_the_cli_shows_control_characters_of_a_site_rule_message_as_text(tmp_path, capsys):
    """Terminal output: an ESC in text advisor prints (here a site rule's message, which the CLI
    explains) reaches the terminal as the visible text \\x1b, never as the escape itself."""
    from advisor.cli import main

    site = tmp_path / "site.toml"
    site.write_text('''
[[rule]]
id = "site.note"
version = 1
title = "A note with escape codes"
tier = "checklist"
when = "cluster.gpus >= 1"
then = [{ action = "checklist" }]
message = "clear \\u001b[2J red \\u001b[31m bell \\u0007 cr \\r end"
rationale = "a message whose text carries terminal escape codes"
references = [{ title = "issue 38", path = "advisor: issues/38" }]
[rule.examples]
fire = [{ "cluster.gpus" = 8 }]
no_fire = [{ "cluster.gpus" = 0 }]
''', encoding="utf-8")
    code = main(["recommend", "--model", "llama-3-8b", "--gpu", "H100", "--gpus", "8", "--rules", str(site)])
    out, err = capsys.readouterr()
    assert code == 0 and "clear \\x1b[2J red \\x1b[31m bell \\x07 cr \\x0d end" in out
    assert not any(c in out + err for c in "\x1b\x07\r")
