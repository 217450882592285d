"""serve.policy.decide_call, the one function that decides a call: each rule, in its order, on ToolStates
written by hand (no servers, no encoder). The attack tests (tests/test_serve_attacks.py) drive the same rules
through real servers and clients."""

from __future__ import annotations

import pytest

from riskrank_jax.serve.policy import Policy, ToolState, decide_call

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # the documented example key id, as detect-secrets' AWS detector matches it


def _row(mutation="read", **flags):
    row = {"mutation": {"value": mutation, "source": "learned"}, "argument_rule": flags.pop("argument_rule", None)}
    for f in ("public_sink", "secret_source", "untrusted_content", "execution", "money"):
        row[f] = {"value": f in flags, "source": flags.get(f)}
    return row


def _tool(name="notes.read_note", level=1, row=None, annotations=None, **kw):
    definition = {"name": name.split(".", 1)[1], "description": "Read a note.",
                  "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                  "required": ["name"], "additionalProperties": False}}
    if annotations is not None:
        definition["annotations"] = annotations
    return ToolState(name, name.split(".")[0], level, "read (learned)", row or _row(), kw.pop("definition", definition),
                     **kw)


CLOSED_READ = {"readOnlyHint": True, "openWorldHint": False}


def test_a_plain_read_passes_at_the_default_policy():
    d = decide_call(Policy(), _tool(annotations=CLOSED_READ), {"name": "todo"})
    assert (d.action, d.rule) == ("allow", "level") and "risk level 1" in d.reason


@pytest.mark.parametrize("tool, arguments, rule, action", [
    (None, {}, "unknown tool", "refuse"),
    (_tool(), [1, 2], "schema", "refuse"),
    (_tool(), {"name": 3}, "schema", "refuse"),
    (_tool(), {}, "schema", "refuse"),
    (_tool(), {"name": "a", "extra": 1}, "schema", "refuse"),
    (_tool(definition=None), {"name": "a"}, "unavailable", "refuse"),
    (_tool(unavailable="server 'notes' is not running"), {"name": "a"}, "unavailable", "refuse"),
    (_tool(pin="unavailable"), {"name": "a"}, "state store", "refuse"),
    (_tool(pin="quarantined"), {"name": "a"}, "quarantine", "confirm"),
    (_tool(pin="changed"), {"name": "a"}, "definition changed", "confirm"),
    (_tool(pin="unknown"), {"name": "a"}, "definition changed", "confirm"),
    (_tool(assessed=False), {"name": "a"}, "definition changed", "confirm"),
    (_tool(instructions="detector: hidden_instruction"), {"name": "a"}, "agent instructions", "confirm"),
])
def test_each_rule_decides_with_its_name(tool, arguments, rule, action):
    d = decide_call(Policy(), tool, arguments)
    assert (d.action, d.rule) == (action, rule), d


def test_deny_comes_first_and_patterns_see_only_the_identity():
    policy = Policy(deny=("notes.*",), allow=("read_note",))
    assert decide_call(policy, _tool(), {"name": 3}).rule == "deny"  # before the schema
    shadow = _tool("shadow.notes.read_note", level=4, row=_row("destructive"))
    # a bare-name allow pattern is no identity; the deny pattern "notes.*" does not match "shadow.notes.…"
    d = decide_call(Policy(allow=("notes.read_note",)), shadow, {"name": "a"})
    assert (d.action, d.rule) == ("confirm", "level")
    assert decide_call(Policy(allow=("shadow.*",)), shadow, {"name": "a"}).action == "allow"


def test_a_changed_or_poisoned_tool_asks_even_when_an_allow_pattern_matches():
    policy = Policy(allow=("notes.*",))
    assert decide_call(policy, _tool(), {"name": "a"}).rule == "allow pattern"
    assert decide_call(policy, _tool(pin="changed"), {"name": "a"}).rule == "definition changed"
    assert decide_call(policy, _tool(instructions="detector: secrecy"), {"name": "a"}).rule == "agent instructions"
    refuse = decide_call(Policy(allow=("notes.*",), confirm="refuse"), _tool(pin="changed"), {"name": "a"})
    assert (refuse.action, refuse.rule) == ("refuse", "definition changed")


def test_a_secret_asks_only_where_it_can_leave_and_is_named_by_kind_never_by_value():
    secret = {"name": f"{AWS_KEY}"}
    closed = decide_call(Policy(), _tool(annotations=CLOSED_READ), secret)
    assert closed.action == "allow" and closed.secrets == ({"path": "arguments.name", "kind": "AWS Access Key"},)
    for annotations in (None, {"readOnlyHint": True}):  # unannotated, or open-world by default
        d = decide_call(Policy(), _tool(annotations=annotations), secret)
        assert (d.action, d.rule) == ("confirm", "secret in arguments") and "AWS Access Key" in d.reason
        assert AWS_KEY not in d.reason and AWS_KEY not in repr(d.secrets)
    sink = _tool("slack.post", level=4, row=_row(public_sink="keywords:post"), annotations=CLOSED_READ)
    assert decide_call(Policy(allow=("slack.*",)), sink, secret).rule == "secret in arguments"


def test_an_argument_naming_a_secret_file_makes_the_call_a_secret_source():
    d = decide_call(Policy(), _tool(annotations=CLOSED_READ), {"name": "~/.ssh/id_rsa"})
    assert (d.action, d.rule) == ("confirm", "level")
    assert "secret_source (arguments: secret path: ssh key)" in d.reason and "risk level 4" in d.reason
    assert decide_call(Policy(), _tool(annotations=CLOSED_READ), {"name": "notes/ssh.md"}).action == "allow"


def test_a_shell_tool_is_decided_by_its_command():
    row = _row("destructive", execution="keywords:run command", argument_rule="shell:command")
    tool = ToolState("box.run", "box", 4, "execution (keywords:run command)", row,
                     {"name": "run", "inputSchema": {"type": "object", "properties": {"command": {"type": "string"}}}})
    ls = decide_call(Policy(), tool, {"command": "ls -la"})
    assert ls.action == "allow" and ls.rule.startswith("shell: ")
    for command in ("sort -o /tmp/out /etc/hosts", "find . -fprint /tmp/x", "git diff --output=/tmp/x",
                    "ls > /tmp/x", "cat $(echo /etc/passwd)"):
        d = decide_call(Policy(), tool, {"command": command})
        assert d.action == "confirm" and d.rule.startswith("shell: "), (command, d)
    secret = decide_call(Policy(), tool, {"command": "cat ~/.ssh/id_rsa"})
    assert secret.action == "confirm" and "secret_source" in secret.reason


def test_a_listing_decides_without_arguments():
    assert decide_call(Policy(), _tool()).action == "allow"  # no schema check, no secrets: nothing to read
    assert decide_call(Policy(), _tool(pin="changed")).action == "confirm"
