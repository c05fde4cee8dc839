"""Engine fallback: where durable_rules cannot be imported (Python 3.13+, no C compiler) the
pure-Python evaluator runs the same compiled rules, every trace names the engine, and
ADVISOR_ENGINE selects one explicitly (research/durable-rules.md §7.7).

"durable unavailable" is simulated in a fresh interpreter: `sys.modules["durable"] = None`
makes `import durable` raise ImportError, exactly as a missing or broken install does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import advisor
import advisor.rulebook.engines as engines
import advisor.rulebook.engines.durable as eng
from advisor.errors import EngineError

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    ({"gpu": "H100-SXM-80GB", "gpus": 64}, "llama-3-70b", None, {"tp": 8, "pp": 4}),
    ({"gpu": "A100-40GB", "gpus": 16}, "llama-2-13b", {"seq_len": "2k"}, {"tp": 3, "pp": 2}),
    ({"gpu": "H100-SXM-80GB", "gpus": 16}, "mixtral-8x7b", {"seq_len": 4096, "global_batch_size": 128},
     {"tp": 2, "ep": 8}),
]

# Runs in the child: optionally blocks durable, then prints one JSON line per case.
CHILD = textwrap.dedent("""
    import json, sys
    if sys.argv[1] == "block":
        sys.modules["durable"] = None               # `import durable` -> ImportError
        sys.modules["durable_rules_engine"] = None
    import advisor, advisor.rulebook.engines as engines, advisor.rulebook.engines.durable as eng
    cases = json.loads(sys.argv[2])
    try:
        info = engines.engine_info()
    except advisor.EngineError as exc:
        info = {"error": str(exc)}
    out = {"available": eng.durable_available(), "import_error": eng.durable_import_error(), "info": info, "results": []}
    for cluster, model, training, layout in cases:
        try:
            rec = advisor.recommend(cluster, model, training)
            aud = advisor.audit(cluster, model, layout, training)
            out["results"].append([rec.model_dump_json(), aud.model_dump_json()])
        except advisor.AdvisorError as exc:
            out["results"].append([type(exc).__name__, str(exc)])
    print(json.dumps(out))
""")


def run_child(mode: str, cases=CASES, env: dict | None = None) -> dict:
    full_env = {k: v for k, v in os.environ.items() if k != "ADVISOR_ENGINE"}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, json.dumps(cases)], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _without_engine(rec_json: str, aud_json: str) -> tuple[dict, dict]:
    rec, aud = json.loads(rec_json), json.loads(aud_json)
    assert rec["trace"]["engine"] == aud["trace"]["engine"]
    rec["trace"]["engine"] = aud["trace"]["engine"] = "<engine>"
    return rec, aud


@pytest.fixture(scope="module")
def blocked() -> dict:
    return run_child("block")


def test_blocked_durable_falls_back_to_python(blocked):
    assert blocked["available"] is False
    assert "import of durable halted" in blocked["import_error"]      # the ImportError's own text
    assert blocked["info"] == {"engine": "python", "durable_rules": None, "python": blocked["info"]["python"]}
    for rec_json, aud_json in blocked["results"]:
        rec, aud = json.loads(rec_json), json.loads(aud_json)
        assert rec["trace"]["engine"] == "python" and aud["trace"]["engine"] == "python"
        assert rec["trace"]["advisor_version"] == aud["trace"]["advisor_version"] == advisor.__version__


@pytest.mark.skipif(not eng.durable_available(), reason="durable_rules does not import here")
def test_python_fallback_gives_the_durable_answers(blocked):
    """Same recommendations, audits and traces; only the engine name differs."""
    for (cluster, model, training, layout), (rec_json, aud_json) in zip(CASES, blocked["results"]):
        rec = advisor.recommend(cluster, model, training, engine="durable")
        aud = advisor.audit(cluster, model, layout, training, engine="durable")
        assert rec.trace.engine == "durable" and aud.engine == "durable"
        assert _without_engine(rec_json, aud_json) == _without_engine(rec.model_dump_json(), aud.model_dump_json())


def test_advisor_engine_python_selects_python():
    out = run_child("plain", CASES[:1], {"ADVISOR_ENGINE": "python"})
    assert out["info"]["engine"] == "python"
    rec = json.loads(out["results"][0][0])
    assert rec["trace"]["engine"] == "python"


def test_advisor_engine_durable_without_durable_names_the_reason():
    out = run_child("block", CASES[:1], {"ADVISOR_ENGINE": "durable"})
    name, message = out["results"][0]
    assert name == "EngineError"
    assert "durable" in message and "cannot be imported" in message
    assert "import of durable halted" in message                          # the reason, verbatim
    assert "cannot be imported" in out["info"]["error"]


def test_cli_reports_the_missing_engine_without_a_traceback():
    code = ("import sys; sys.modules['durable'] = None; from advisor.cli import main; "
            "sys.exit(main(['recommend', '--model', 'llama-3-8b', '--gpu', 'H100', '--gpus', '8', '--engine', 'durable']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "ADVISOR_ENGINE"})
    assert proc.returncode == 2, proc.stderr
    assert "cannot be imported" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_engine_name_is_an_engine_error(monkeypatch):
    with pytest.raises(EngineError, match="unknown engine"):
        advisor.recommend({"gpu": "H100", "gpus": 8}, "llama-3-8b", engine="clips")
    monkeypatch.setenv("ADVISOR_ENGINE", "clips")
    with pytest.raises(EngineError, match="ADVISOR_ENGINE"):
        engines.make_engine({})


def test_explicit_python_engine_in_process():
    rec = advisor.recommend({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", engine="python")
    aud = advisor.audit({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", {"tp": 3}, engine="python")
    assert rec.trace.engine == "python" and aud.engine == "python"
    assert aud.errors


def test_make_engine_honours_the_environment(monkeypatch):
    monkeypatch.setenv("ADVISOR_ENGINE", "python")
    assert engines.make_engine({}).name == "python"
    assert engines.engine_info()["engine"] == "python"
    monkeypatch.setenv("ADVISOR_ENGINE", " Python ")
    assert engines.make_engine({}).name == "python"
    monkeypatch.setenv("ADVISOR_ENGINE", "")
    assert engines.make_engine({}).name == ("durable" if eng.durable_available() else "python")


@pytest.mark.skipif(not eng.durable_available(), reason="the default engine is already python")
def test_advisor_engine_changed_at_run_time(monkeypatch):
    """ADVISOR_ENGINE set after the first call takes effect (the engine cache is keyed by the
    engine actually selected, not by the argument)."""
    advisor.recommend({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b")       # caches the default engine
    monkeypatch.setenv("ADVISOR_ENGINE", "python")
    rec = advisor.recommend({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b")
    assert rec.trace.engine == "python"


# ------------------------------------------------------------------------------------------------
# Provenance and determinism


def test_every_result_carries_version_engine_and_ruleset_revision(tmp_path):
    book_revision = advisor.recommend({"gpu": "H100", "gpus": 8}, "llama-3-8b").trace.ruleset_revision
    for cluster, model, training, layout in CASES:
        for engine in ("python", None):
            rec = advisor.recommend(cluster, model, training, engine=engine)
            aud = advisor.audit(cluster, model, layout, training, engine=engine)
            for version, name, revision in ((rec.trace.advisor_version, rec.trace.engine, rec.trace.ruleset_revision),
                                            (aud.advisor_version, aud.engine, aud.ruleset_revision)):
                assert version == advisor.__version__
                assert name == (engine or engines.engine_info()["engine"])
                assert revision == book_revision and re.fullmatch(r"sha256:[0-9a-f]{16}", revision)
            assert f"engine {rec.trace.engine}" in rec.explain("full")
            assert aud.ruleset_revision in aud.explain()
    # A site rule file changes the revision, so a result names the exact rule set it came from.
    site = tmp_path / "site.toml"
    site.write_text(SITE_RULE)
    rec = advisor.recommend({"gpu": "H100", "gpus": 8}, "llama-3-8b", rules=(site,))
    assert rec.trace.ruleset_revision != book_revision


SITE_RULE = '''
[[rule]]
id = "site.provenance-check"
version = 1
title = "Provenance check"
tier = "checklist"
when = "cluster.gpus >= 1"
then = [{ action = "checklist" }]
message = "A site rule fired."
rationale = "Proves the revision covers site rules."
references = [{ title = "Site policy", url = "https://example.org/policy" }]
examples = { fire = [{ "cluster.gpus" = 8 }], no_fire = [{ "cluster.gpus" = 0 }] }
'''


def test_same_input_gives_byte_identical_json_across_processes():
    """Two fresh interpreters with different hash seeds (set and dict iteration orders differ)
    produce the same bytes, and the same as this process."""
    procs = []
    for seed in ("1", "4242"):
        env = {k: v for k, v in os.environ.items() if k != "ADVISOR_ENGINE"} | {"PYTHONHASHSEED": seed}
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, "plain", json.dumps(CASES)], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout)["results"])
    assert outs[0] == outs[1]
    # the children run without ADVISOR_ENGINE, on the engine selected by default; so does this comparison
    default = "durable" if eng.durable_available() else "python"
    here = [[advisor.recommend(c, m, t, engine=default).model_dump_json(),
             advisor.audit(c, m, lay, t, engine=default).model_dump_json()] for c, m, t, lay in CASES]
    assert outs[0] == here
