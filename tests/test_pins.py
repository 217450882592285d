"""serve.pins and `riskrank-jax pins`: definitions pinned at first sight, a change marked until a person
accepts it (going back does not clear it), quarantine, every definition kept, and a store that cannot be read
answering "unavailable" (the gate then refuses)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

from click.testing import CliRunner

from riskrank_jax.cli.main import cli
from riskrank_jax.serve.pins import PinStore, definition_hash
from riskrank_jax.serve.store import SCHEMA_VERSION

READ = {"name": "get_weather", "description": "Get the weather for a city.",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "annotations": {"readOnlyHint": True}}
AUTH = dict(READ, inputSchema={"type": "object", "properties": {"city": {"type": "string"},
                                                                "auth": {"type": "string"}},
                               "required": ["city", "auth"]})


def test_hash_covers_each_part_of_a_definition_and_nothing_else():
    base = definition_hash(READ)
    assert definition_hash(dict(READ)) == base
    assert definition_hash({k: READ[k] for k in reversed(list(READ))}) == base  # key order does not matter
    for key, value in [("description", "Get the weather."), ("inputSchema", AUTH["inputSchema"]),
                       ("annotations", {"readOnlyHint": False}), ("outputSchema", {"type": "object"}),
                       ("title", "Weather")]:
        assert definition_hash(dict(READ, **{key: value})) != base, key
    assert definition_hash(dict(READ, _meta={"x": 1})) == base  # not part of the definition


def test_first_sight_accepted_a_change_marked_and_going_back_does_not_clear_it(tmp_path):
    store = PinStore(tmp_path)
    assert store.observe("weather", [READ]) == [{"tool": "get_weather", "status": "accepted", "was": None}]
    assert store.status("weather", "get_weather", definition_hash(READ)) == "accepted"
    assert store.observe("weather", [READ]) == []  # same listing again: nothing new
    # a definition the store has not recorded yet is already "changed" for the gate
    assert store.status("weather", "get_weather", definition_hash(AUTH)) == "changed"
    assert store.observe("weather", [AUTH]) == [{"tool": "get_weather", "status": "changed", "was": "accepted"}]
    assert store.status("weather", "get_weather", definition_hash(AUTH)) == "changed"
    store.observe("weather", [READ])  # back to the accepted definition
    assert store.status("weather", "get_weather", definition_hash(READ)) == "changed"
    row, = store.rows()
    assert row["tool"] == "weather.get_weather" and row["status"] == "changed" and row["definitions_seen"] == 2
    assert [d["hash"] for d in store.definitions("weather.get_weather")] == [definition_hash(READ),
                                                                           definition_hash(AUTH)]
    assert store.accept(["weather.get_weather"]) == ["weather.get_weather"]
    assert store.status("weather", "get_weather", definition_hash(READ)) == "accepted"
    assert store.status("weather", "get_weather", definition_hash(AUTH)) == "changed"
    assert store.status("weather", "other_tool", definition_hash(READ)) == "unknown"


def test_quarantine_holds_new_tools_until_accepted_by_server(tmp_path):
    store = PinStore(tmp_path)
    store.observe("new", [READ, dict(READ, name="get_time")], quarantine=True)
    assert {r["status"] for r in store.rows()} == {"quarantined"}
    store.observe("new", [dict(AUTH)], quarantine=True)  # a change while quarantined stays quarantined
    assert store.status("new", "get_weather", definition_hash(AUTH)) == "quarantined"
    assert store.accept(servers=["new"]) == ["new.get_time", "new.get_weather"]
    assert store.status("new", "get_weather", definition_hash(AUTH)) == "accepted"


def test_cli_lists_shows_and_accepts_while_another_process_holds_the_store(tmp_path):
    store = PinStore(tmp_path)
    store.observe("weather", [READ])
    store.observe("weather", [AUTH])
    runner = CliRunner()
    r = runner.invoke(cli, ["pins", "list", "--state-dir", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)
    assert row["tool"] == "weather.get_weather" and row["status"] == "changed"
    assert row["accepted"] == definition_hash(READ)[:12] and row["current"] == definition_hash(AUTH)[:12]
    r = runner.invoke(cli, ["pins", "show", "weather.get_weather", "--state-dir", str(tmp_path)])
    assert r.exit_code == 0 and '"auth"' in r.output
    r = runner.invoke(cli, ["pins", "accept", "weather.nope", "--state-dir", str(tmp_path)])
    assert r.exit_code == 1 and "no pinned tool 'weather.nope'" in r.output
    r = runner.invoke(cli, ["pins", "accept", "--state-dir", str(tmp_path)])
    assert r.exit_code == 2 and "--all" in r.output
    # another process accepts (as a person does while the gateway runs); this store sees it at once
    p = subprocess.run([sys.executable, "-m", "riskrank_jax.cli.main", "pins", "accept", "weather.get_weather",
                        "--state-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "accepted weather.get_weather" in p.stdout, p.stderr
    assert store.status("weather", "get_weather", definition_hash(AUTH)) == "accepted"


def test_a_store_that_cannot_be_read_answers_unavailable(tmp_path):
    store = PinStore(tmp_path)
    store.observe("weather", [READ])
    store.path.write_bytes(b"this is not a database" * 100)
    assert store.status("weather", "get_weather", definition_hash(READ)) == "unavailable"
    os.remove(store.path)
    assert store.status("weather", "get_weather", definition_hash(READ)) == "unavailable"  # never re-created read-only


def test_store_file_is_private_and_versioned(tmp_path):
    store = PinStore(tmp_path / "state")
    assert oct(store.path.stat().st_mode & 0o777) == "0o600"
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        db.execute("PRAGMA user_version = 99")
    from riskrank_jax.errors import ConfigError

    try:
        PinStore(tmp_path / "state")
    except ConfigError as e:
        assert "schema version 99" in str(e) and str(store.path) in str(e)
    else:
        raise AssertionError("a newer store must not be opened")
