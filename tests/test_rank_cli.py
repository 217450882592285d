"""`riskrank-jax rank` / `fit`, Ranker.from_registry's defaults on the shipped MCP example, the README's
"Rank your own tools" commands and examples/retrieve_tools.py (real default encoder, temporary cache)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import cli_invoker, run_script
from riskrank_jax.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MCP = str(EXAMPLES / "mcp_tools.json")
READ_ONLY = ("show me the recent commits", "search the web for the weather in Paris", "read the config file",
             "list my unread e-mails", "what is my account balance", "which files did I change?")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def invoke(cache):
    return cli_invoker(cache)


@pytest.fixture(scope="module")
def ranker(cache):
    from riskrank_jax.encode.embedding_cache import EmbeddingCache
    from riskrank_jax.rank.ranker import Ranker

    return Ranker.from_registry([MCP], cache=EmbeddingCache(cache))


def test_default_hides_risky_tools_from_read_only_requests_but_not_from_destructive_ones(ranker):
    from riskrank_jax.rank.ranker import RankConfig

    zero = ranker.with_config(RankConfig(lam=0.0, alpha=ranker.config.alpha, first_stage="hybrid"))
    now = [sum(h.risky for h in hs) for hs in ranker.rank_queries(list(READ_ONLY), k=5)]
    before = [sum(h.risky for h in hs) for hs in zero.rank_queries(list(READ_ONLY), k=5)]
    assert all(a <= b for a, b in zip(now, before)) and sum(now) < sum(before), (now, before)
    hits = ranker.rank_queries(["delete the branch feature-x"], k=5)[0]
    assert hits[0].name == "git_delete_branch" and hits[0].risk_level >= 3 and hits[0].risky


def test_rank_json_with_explain(invoke):
    out = json.loads(invoke("rank", MCP, "--query", "delete the branch feature-x", "--query",
                            "show me the recent commits", "--json", "--explain").stdout)
    assert out["config"]["first_stage"] == "hybrid" and out["config"]["lambda"] == 0.5
    delete, commits = out["results"]
    assert delete["hits"][0]["name"] == "git_delete_branch"
    assert set(delete["hits"][0]) == {"rank", "name", "score", "relevance", "risk_level", "risk_source", "risky"}
    ex = commits["explain"]
    assert [t["name"] for t in ex["tools"]] == [h["name"] for h in commits["hits"]]
    for t in ex["tools"]:  # the stages add up: final = first stage − λ·risk + graph (zero-shot)
        assert t["score"] == pytest.approx(t["first_stage_score"] + t["risk_penalty"] + t["graph"] + t["names"],
                                           abs=1e-4)
    assert any(h["name"] == "git_push" and h["risk_level"] >= 3 for h in ex["held_back"]), ex["held_back"]


def test_rank_explain_says_what_the_request_asks_and_why_each_tool_is_held_back(invoke):
    """With intent (the default), --explain says what the request was read as asking, per effect with its source,
    and for each held-back tool which of its effects the request did not ask for; --intent-hold-back ranks such a
    tool last (held_by), --no-intent leaves the request out."""
    from riskrank_jax.retrieve.intent import EFFECTS

    q = ("--query", "show me the recent commits", "--explain")
    out = json.loads(invoke("rank", MCP, *q, "--json", "--intent-hold-back", "0.75").stdout)
    assert out["config"]["intent"] is True and out["config"]["intent_hold_back"] == 0.75
    ex = out["results"][0]["explain"]
    assert ex["request"]["asks"] == "the request only reads" and set(ex["request"]["effects"]) == set(EFFECTS)
    assert all(set(v) == {"need", "source"} for v in ex["request"]["effects"].values())
    push = {h["name"]: h for h in ex["held_back"]}["git_push"]
    assert push["held_by"] == "intent hold-back" and push["rank_now"] > 5
    assert push["intent"].startswith("held back: ") and "sends to others" in push["intent"]
    assert push["intent"].endswith("; the request only reads") and push["reason"].startswith(push["intent"])
    text = invoke("rank", MCP, *q).stdout
    assert "  intent: the request only reads" in text and "      held back: " in text
    off = json.loads(invoke("rank", MCP, *q, "--json", "--no-intent").stdout)
    assert off["config"]["intent"] is False and off["results"][0]["explain"]["request"] is None
    assert all(h["intent"] is None and h["held_by"] == "risk penalty" for h in off["results"][0]["explain"]["held_back"])


def test_rank_text_from_a_queries_file_with_lambda_and_min_score(invoke, tmp_path):
    qfile = tmp_path / "q.txt"
    qfile.write_text("read the config file\n\nsend 20 euros to Alice\n")
    res = invoke("rank", MCP, "--queries", str(qfile), "--k", "3", "--lambda", "0")
    blocks = res.stdout.split("\n\n")
    assert len(blocks) == 2 and blocks[0].startswith("query: read the config file")
    assert "read_file" in blocks[0].splitlines()[2] and "send_payment" in blocks[1]
    res = invoke("rank", MCP, "--query", "read the config file", "--min-score", "2.5", "--json")
    hits = json.loads(res.stdout)["results"][0]["hits"]
    assert 1 <= len(hits) < 5 and all(h["score"] >= 2.5 for h in hits)


@pytest.mark.parametrize("content,args,message", [
    ("[]", ("--query", "x"), "no tools in"),
    ('{"foo": 1}', ("--query", "x"), "accepted formats"),
    ('[{"name": "a", "description": "b"}', ("--query", "x"), "line 1"),
    (None, ("--query", "   "), "query 1 is empty"),
    (None, (), "give --query TEXT"),
    (None, ("--queries", "MISSING"), "file not found"),
    (None, ("--query", "x", "--model", "NOWHERE"), "no saved ranker here"),
])
def test_rank_bad_input_is_one_error_line(invoke, tmp_path, content, args, message):
    path = MCP
    if content is not None:
        path = str(tmp_path / "tools.json")
        Path(path).write_text(content)
    args = [str(tmp_path / a) if a in ("MISSING", "NOWHERE") else a for a in args]
    res = invoke("rank", path, *args, code=1)
    assert res.stderr.startswith("error: ") and message in res.stderr, res.stderr


def test_fit_log_errors_name_file_and_line(invoke, tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"query": "read it", "tools": ["read_file"]}\n{"query": "rm it", "tools": ["remove_file"]}\n')
    res = invoke("fit", MCP, "--queries", str(log), "--out", str(tmp_path / "m"), code=1)
    assert f"{log}:2: unknown tool 'remove_file'" in res.stderr and "did you mean" in res.stderr
    log.write_text('{"query": "read it", "tools": ["read_file"]}\n')
    res = invoke("fit", MCP, "--queries", str(log), "--out", str(tmp_path / "m"), code=1)
    assert "need at least 3" in res.stderr


def test_readme_commands_run_as_written(cache, tmp_path, monkeypatch, capsys):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Rank your own tools"):readme.index("## Command line")]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()
    assert any("--explain" in c for c in commands) and any(c.startswith("riskrank-jax fit") for c in commands)
    (tmp_path / "examples").symlink_to(EXAMPLES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RISKRANK_CACHE", cache)
    outputs = []
    for line in commands:  # each in this process: the CLI through click, the example script as __main__
        argv = shlex.split(line)
        if argv[0] == "riskrank-jax":
            res = CliRunner().invoke(cli, argv[1:], env={"RISKRANK_CACHE": cache})
            assert res.exit_code == 0, (line, res.output, res.stderr)
            outputs.append(res.stdout)
        else:
            assert argv[:2] == ["python", "examples/retrieve_tools.py"]
            outputs.append(run_script(argv[1], *argv[2:], capsys=capsys, monkeypatch=monkeypatch))
    assert (tmp_path / "my_ranker" / "manifest.json").is_file()
    assert "held back" in outputs[2] and "git_delete_branch" in outputs[-1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    exec(compile(code, "README.md (## Rank your own tools)", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.startswith("1 git_delete_branch")


def test_fit_and_rank_help_state_the_config_trees_defaults():
    """The CLI states FitConfig's, FIT_TUNE_CONFIG's and the zero-shot RankConfig's defaults and applies them
    (fit's --seeds and --epochs default to None and take FitConfig's)."""
    from riskrank_jax.rank.fit import FIT_TUNE_CONFIG, FitConfig
    from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG

    fit_help = " ".join(CliRunner().invoke(cli, ["fit", "--help"]).output.split())
    fit = FitConfig()
    assert f"default: {' '.join(map(str, fit.seeds))}, FitConfig.seeds" in fit_help
    assert f"default: {fit.epochs}, FitConfig.epochs" in fit_help
    assert f"default: {FIT_TUNE_CONFIG.layers}, FIT_TUNE_CONFIG.layers" in fit_help
    assert f"default: {FIT_TUNE_CONFIG.epochs}, FIT_TUNE_CONFIG.epochs" in fit_help
    assert f"FIT_TUNE_CONFIG.step_budget = {FIT_TUNE_CONFIG.step_budget} steps" in fit_help
    assert f"A seeded {fit.heldout_fraction * 100:.0f} % of the distinct logged requests is held out" in fit_help
    rank_help = " ".join(CliRunner().invoke(cli, ["rank", "--help"]).output.split())
    assert f"Default {DEFAULT_REGISTRY_CONFIG.lam:g} for the zero-shot ranker" in rank_help
    assert f"Tools per request. Default {DEFAULT_REGISTRY_CONFIG.k} for the zero-shot ranker" in rank_help
