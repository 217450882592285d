"""The gateway's settings tree (serve.config.GatewaySettings): read from the config file, each flag of
`riskrank-jax serve` a spelling of one leaf that wins over the file, shown by --show-config without secrets."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from riskrank_jax.cli.main import cli
from riskrank_jax.cli.serve import FLAG_LEAVES, serve_command
from riskrank_jax.serve.config import (PATH_LEAVES, GatewaySettings, HttpSettings, RankSettings, read_config,
                                       settings_view, with_leaves)

TOKEN = "t0ken-of-sixteen-or-more"
SECRET = "sk-live-do-not-print"


def _write(tmp_path, doc) -> str:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_every_flag_spells_one_leaf_of_the_tree():
    flags = {p.opts[0] for p in serve_command.params if isinstance(p, click.Option)}
    assert set(FLAG_LEAVES) == flags - {"--config", "--show-config"}
    leaves = list(FLAG_LEAVES.values())
    assert len(set(leaves)) == len(leaves)
    tree = GatewaySettings()
    for leaf in leaves:
        section, key = leaf.split(".")
        assert hasattr(getattr(tree, section), key), leaf
    assert all(getattr(getattr(tree, leaf.split(".")[0]), leaf.split(".")[1], "x") is None for leaf in PATH_LEAVES)


def test_a_config_of_the_old_format_loads_with_every_new_section_at_its_default(tmp_path):
    path = _write(tmp_path, {"mcpServers": {"a": {"command": "python"}}, "policy": {"allow_level": 2},
                             "limits": {"call_timeout_s": 5}})
    s = read_config(path)
    assert (s.policy.allow_level, s.limits.call_timeout_s, s.path) == (2, 5, path)
    assert (s.rank, s.http) == (RankSettings(), HttpSettings())
    assert s.runtime.expose == "search" and s.rank.config.lam == 0.5  # the registry ranker's defaults


def test_sections_read_paths_relative_to_the_config_file(tmp_path):
    (tmp_path / "enc").mkdir()
    path = _write(tmp_path, {"mcpServers": {"a": {"command": "python"}},
                             "rank": {"model": "m", "encoder": "enc", "trust_annotations": True},
                             "http": {"address": "127.0.0.1:8931", "token_file": "tok", "allowed_hosts": ["gw"]},
                             "runtime": {"audit_log": "audit.jsonl", "state_dir": "st", "tool_references": True}})
    s = read_config(path)
    assert s.rank.model == str(tmp_path / "m") and s.rank.encoder == str(tmp_path / "enc")
    assert s.rank.trust_annotations and s.runtime.tool_references
    assert s.http == HttpSettings("127.0.0.1:8931", str(tmp_path / "tok"), ("gw",))
    assert (s.runtime.audit_log, s.runtime.state_dir) == (str(tmp_path / "audit.jsonl"), str(tmp_path / "st"))
    hub = read_config(_write(tmp_path, {"mcpServers": {"a": {"command": "x"}}, "rank": {"encoder": "org/model"}}))
    assert hub.rank.encoder == "org/model"  # not a directory beside the config: a hub id, kept as given


def test_flags_win_over_the_file_and_show_config_prints_the_tree_without_secrets(tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    path = _write(tmp_path, {
        "mcpServers": {"a": {"command": "definitely-not-a-command", "env": {"API_KEY": SECRET}},
                       "b": {"url": f"https://user:{SECRET}@h.example/mcp?key={SECRET}",
                             "headers": {"Authorization": f"Bearer {SECRET}"}}},
        "policy": {"allow_level": 2}, "runtime": {"expose": "filtered", "audit_log": "from_file.jsonl"},
        "http": {"address": "127.0.0.1:1", "token_file": str(token)}})
    r = CliRunner().invoke(cli, ["serve", "--config", path, "--allow-level", "4", "--expose", "search",
                                 "--http", "127.0.0.1:8931", "--show-config"])
    assert r.exit_code == 0, r.output
    assert SECRET not in r.output and TOKEN not in r.output
    shown = json.loads(r.output)
    assert shown["policy"]["allow_level"] == 4 and shown["runtime"]["expose"] == "search"  # the flags
    assert shown["runtime"]["audit_log"] == str(tmp_path / "from_file.jsonl")  # the file, where no flag is given
    assert shown["http"]["address"] == "127.0.0.1:8931"
    assert shown["http"]["token"].startswith("set") and '"http.token_file" of' in shown["http"]["token"]
    assert shown["servers"]["a"]["env"] == {"API_KEY": "(hidden)"}
    assert shown["servers"]["b"]["headers"] == {"Authorization": "(hidden)"}
    assert shown["servers"]["b"]["url"] == "https://(hidden)@h.example/mcp?(hidden)"
    assert shown["rank"]["config"]["first_stage"] == "hybrid"


def test_http_settings_from_the_file_are_checked_like_the_flags(tmp_path):
    path = _write(tmp_path, {"mcpServers": {"a": {"command": "python"}}, "http": {"address": "0.0.0.0:8931"}})
    r = CliRunner().invoke(cli, ["serve", "--config", path, "--show-config"])
    assert r.exit_code == 2 and '"http.address" of' in r.output and "--token-file" in r.output
    path = _write(tmp_path, {"mcpServers": {"a": {"command": "python"}}, "http": {"allowed_hosts": ["gw"]}})
    r = CliRunner().invoke(cli, ["serve", "--config", path, "--show-config"])
    assert r.exit_code == 2 and '"http.allowed_hosts" of' in r.output and "is for --http" in r.output


def test_with_leaves_and_the_view_of_a_tree_built_in_python():
    s = with_leaves(GatewaySettings(registries=("r.json",)), {"policy.allow_level": 5, "runtime.expose": "filtered",
                                                              "registries": ("a.json",)})
    assert (s.policy.allow_level, s.runtime.expose, s.registries) == (5, "filtered", ("a.json",))
    view = settings_view(s)
    assert view["http"]["token"] == "none" and json.loads(json.dumps(view))["runtime"]["expose"] == "filtered"


def test_intent_leaves_from_the_file_and_the_flags(tmp_path):
    """rank.intent and rank.intent_hold_back: the gateway's defaults (intent on, hold-back GATEWAY_HOLD_BACK), set
    by the file, overridden by --intent/--no-intent and --intent-hold-back (0 and --no-intent count as given),
    checked as numbers in 0..1; the view shows the served config with them applied."""
    from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG
    from riskrank_jax.serve.config import GATEWAY_HOLD_BACK

    s = RankSettings()
    assert (s.intent, s.intent_hold_back) == (DEFAULT_REGISTRY_CONFIG.intent, GATEWAY_HOLD_BACK)
    assert 0 < GATEWAY_HOLD_BACK < 1 and s.ranker_config().intent_hold_back == GATEWAY_HOLD_BACK
    assert s.ranker_config().lam == DEFAULT_REGISTRY_CONFIG.lam
    path = _write(tmp_path, {"mcpServers": {"a": {"command": "python"}},
                             "rank": {"intent_hold_back": 0.7, "trust_annotations": True}})
    assert read_config(path).rank.intent_hold_back == 0.7 != GATEWAY_HOLD_BACK

    def shown(*flags):
        r = CliRunner().invoke(cli, ["serve", "--config", path, *flags, "--show-config"])
        assert r.exit_code == 0, r.output
        rank = json.loads(r.output)["rank"]
        return rank["intent"], rank["intent_hold_back"], rank["config"]["intent"], rank["config"]["intent_hold_back"]

    assert shown() == (True, 0.7, True, 0.7)
    assert shown("--no-intent", "--intent-hold-back", "0") == (False, 0.0, False, 0.0)
    assert shown("--intent-hold-back", "0.9") == (True, 0.9, True, 0.9)
    r = CliRunner().invoke(cli, ["serve", "--config", path, "--show-config"])
    assert json.loads(r.output)["rank"]["trust_annotations"] is True  # a flag not given leaves the file's value
    for bad in (2, "0.5", True):
        r = CliRunner().invoke(cli, ["serve", "--config", _write(tmp_path, {"mcpServers": {"a": {"command": "x"}},
                                                                           "rank": {"intent_hold_back": bad}}),
                                     "--show-config"])
        assert r.exit_code != 0 and "rank.intent_hold_back must be a number in 0..1" in r.output
    r = CliRunner().invoke(cli, ["serve", "--config", path, "--intent-hold-back", "1.5", "--show-config"])
    assert r.exit_code == 2
    # --help states the gateway's default (written out there so that --help loads no ranker)
    for command, said in (("serve", f"Default: {GATEWAY_HOLD_BACK}: "), ("rank", f"(the gateway's: {GATEWAY_HOLD_BACK})")):
        out = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
        assert said in out, out
