"""Decisions that depend on a call's arguments, for tools whose risk lies in what they are given.

`dimensions.argument_rule` names the argument ("sql:query", "shell:command", "code:code"); `judge_arguments`
reads it for one call:

* **sql** (parsed with sqlglot, never with regular expressions): exactly one statement that only reads — a
  SELECT (or a UNION of them, a WITH whose body reads and holds no write), SHOW, DESCRIBE, or an EXPLAIN of a
  read — gives ``reads=True`` with the rule "sql: one read-only statement (SELECT)"; several statements, a
  statement that writes (INSERT, UPDATE, DELETE, MERGE, DDL, GRANT, COPY, ...), ``SELECT ... INTO``, a locking
  read (FOR UPDATE), a call of a function sqlglot does not know (``nextval``, ``dblink_exec``: it may write) or
  text sqlglot cannot parse gives ``reads=False`` with the reason;
* **shell**: one simple command of `READ_ONLY_COMMANDS` (no pipes, redirections, substitutions, ``;`` or
  ``&&``) reads; anything else does not;
* **code**: code is not analysed: every call asks.

A call that reads is decided as a read for that call (mutation read, no execution); one that does not keeps
the tool's own dimensions. Why: a Postgres ``query`` tool that runs one SELECT should not need the user each
time, and one that runs ``DELETE`` must.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass

READ_ONLY_COMMANDS = frozenset({
    "ls", "pwd", "cat", "head", "tail", "wc", "grep", "rg", "find", "echo", "date", "whoami", "uname", "which",
    "stat", "du", "df", "file", "tree", "sort", "uniq", "diff"})
_FIND_ACTIONS = ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls")
_GIT_READS = frozenset({"status", "log", "diff", "show", "blame", "rev-parse", "ls-files"})
_SHELL_OPERATORS = ("|", "&", ";", ">", "<", "`", "$(", "\n")


@dataclass(frozen=True)
class ArgumentJudgement:
    """reads: the call only reads; rule: which rule decided, for the decision's reason and the audit line."""

    reads: bool
    rule: str


def judge_arguments(rule: str, arguments: dict) -> ArgumentJudgement | None:
    """The judgement of one call under an argument rule ("sql:<param>", "shell:<param>", "code:<param>");
    None when ``rule`` is "" (the tool's risk does not lie in an argument)."""
    if not rule:
        return None
    kind, _, param = rule.partition(":")
    value = arguments.get(param) if isinstance(arguments, dict) else None
    if not isinstance(value, str) or not value.strip():
        return ArgumentJudgement(False, f"{kind}: argument '{param}' missing or not a string")
    if kind == "sql":
        return judge_sql(value)
    if kind == "shell":
        return judge_shell(value)
    return ArgumentJudgement(False, f"{kind}: code is not analysed, every call asks")


def _reads(expr) -> tuple[bool, str]:
    """(only reads, the statement's kind) of one parsed sqlglot statement."""
    from sqlglot import exp

    kind = type(expr).__name__.upper()
    if isinstance(expr, exp.Command):  # statements sqlglot keeps as text: EXPLAIN, SHOW in some dialects
        head = (expr.this or "").upper()
        if head == "EXPLAIN" and "ANALYZE" not in str(expr.expression or "").upper():
            return True, "EXPLAIN"
        return head == "SHOW", head or "COMMAND"
    if isinstance(expr, (exp.Show, exp.Describe)):
        return True, kind
    if not isinstance(expr, exp.Query):
        return False, kind
    writes = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter, exp.Into,
              exp.TruncateTable, exp.Command)
    for node in expr.walk():
        if isinstance(node, writes):
            return False, f"{kind} with {type(node).__name__.upper()}"
        if isinstance(node, exp.Lock):
            return False, f"{kind} FOR UPDATE"
        if isinstance(node, exp.Anonymous):  # a function sqlglot does not know may write (nextval, dblink_exec)
            return False, f"{kind} calling {node.name}()"
    return True, "SELECT" if isinstance(expr, (exp.Select, exp.SetOperation, exp.Subquery)) else kind


def judge_sql(sql: str) -> ArgumentJudgement:
    """One read-only statement reads; several statements, any write or unparseable SQL does not."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    quiet = logging.getLogger("sqlglot")
    level, quiet.level = quiet.level, logging.ERROR  # "falling back to parsing as a Command" is not news here
    try:
        statements = [s for s in sqlglot.parse(sql) if s is not None]
    except SqlglotError as e:
        return ArgumentJudgement(False, f"sql: not parsed ({str(e).splitlines()[0][:80]})")
    finally:
        quiet.setLevel(level)
    if not statements:
        return ArgumentJudgement(False, "sql: no statement")
    if len(statements) > 1:
        return ArgumentJudgement(False, f"sql: {len(statements)} statements")
    reads, kind = _reads(statements[0])
    if reads:
        return ArgumentJudgement(True, f"sql: one read-only statement ({kind})")
    return ArgumentJudgement(False, f"sql: {kind} is not read-only")


def judge_shell(command: str) -> ArgumentJudgement:
    """One simple command of READ_ONLY_COMMANDS (or a read-only git subcommand) reads; anything else does not."""
    if any(op in command for op in _SHELL_OPERATORS):
        return ArgumentJudgement(False, "shell: pipes, redirections, substitutions or several commands")
    try:
        words = shlex.split(command)
    except ValueError as e:
        return ArgumentJudgement(False, f"shell: not parsed ({e})")
    if not words:
        return ArgumentJudgement(False, "shell: no command")
    prog = words[0].rsplit("/", 1)[-1]
    if prog == "git" and len(words) > 1 and words[1] in _GIT_READS:
        return ArgumentJudgement(True, f"shell: one read-only command (git {words[1]})")
    if prog not in READ_ONLY_COMMANDS:
        return ArgumentJudgement(False, f"shell: '{prog}' is not a known read-only command")
    if prog == "find" and any(w in _FIND_ACTIONS for w in words[1:]):
        return ArgumentJudgement(False, "shell: find with an action that writes or runs commands")
    return ArgumentJudgement(True, f"shell: one read-only command ({prog})")


__all__ = ["ArgumentJudgement", "judge_arguments", "judge_sql", "judge_shell", "READ_ONLY_COMMANDS"]
