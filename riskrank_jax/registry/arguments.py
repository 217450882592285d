"""Decisions that depend on a call's arguments, for tools whose risk lies in what they are given.

`dimensions.argument_rule` names the argument ("sql:query", "shell:command", "code:code"); `judge_arguments`
reads it for one call:

* **sql** (parsed with sqlglot, never with regular expressions): exactly one statement that only reads — a
  SELECT (or a UNION of them, a WITH whose body reads and holds no write), SHOW, DESCRIBE, or an EXPLAIN of a
  read — gives ``reads=True`` with the rule "sql: one read-only statement (SELECT)"; several statements, a
  statement that writes (INSERT, UPDATE, DELETE, MERGE, DDL, GRANT, COPY, ...), ``SELECT ... INTO``, a locking
  read (FOR UPDATE), a call of a function sqlglot does not know (``nextval``, ``dblink_exec``: it may write) or
  text sqlglot cannot parse gives ``reads=False`` with the reason;
* **shell** (parsed with bashlex, a bash parser, never with substrings): one simple command, or a pipeline
  whose every stage is one (``git log --oneline | head -5``: stages that only read and write to the pipe only
  read), reads when its program is in the read-only table (`SHELL_COMMANDS`) and every option it is given is
  on that program's allowed list. Anything else asks (``reads=False``): text bashlex cannot parse; lists
  (``;``, ``&&``, ``||``, ``&``), subshells, groups, functions and control structures; any redirection or
  here-document; command and process substitution; any parameter expansion (``$X`` may hold options, and
  ``${X:-$(cmd)}`` runs code); assignments (``FOO=bar cmd``); wrappers that run other commands (``env``,
  ``sudo``, ``xargs``, ``eval``, ``timeout``: none is in the table); a program named by a path outside the
  system directories (``./ls``); an unknown option (abbreviations included: ``sort --out=f`` is
  ``--output``); a word that a glob or brace expansion could turn into an option (``sort *`` in a folder
  holding a file named ``-o``). The table leaves out every option that writes or runs something: ``sort -o``,
  ``find -delete/-exec/-fprint``, ``git diff --output``, ``git -c``, ``rg --pre``, ``tree -o``, ``date -s``,
  ``tail -f`` (never returns), ``file -C``; ``uniq`` takes one file at most (a second is its output);
  ``date`` only ``+FORMAT``; ``git`` only ``status``, ``log``, ``show``, ``diff``, ``blame``, ``rev-parse``,
  ``ls-files`` and listing ``branch`` (no global option but ``--no-pager``; ``--ext-diff``, ``--textconv``,
  ``--output`` refused). A repository's own config (``diff.external``, a textconv driver) can still run a
  program under ``git diff``: the table cannot see it;
* **code**: code is not analysed: every call asks.

Every rule also looks for **secret paths** in the argument (`secret_path_kinds`: ``~/.ssh/id_rsa``, ``.env``,
``.aws/credentials``, ...; a shell command's parsed words): ``secret_source=True`` marks a call that reads or
names a file holding credentials, whatever ``reads`` says. ``reads`` keeps its meaning (nothing is written or
run): ``cat ~/.ssh/id_rsa`` reads, with the rule "shell: reads a secret path (ssh key)"; a call that does not
read has its rule followed by "; names a secret path (ssh key)".

A call that reads is decided as a read for that call (mutation read, no execution); one that does not keeps
the tool's own dimensions. Why: a Postgres ``query`` tool that runs one SELECT should not need the user each
time, and one that runs ``DELETE`` must.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import bashlex
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from riskrank_jax.errors import escaped


@dataclass(frozen=True)
class ArgumentJudgement:
    """reads: the call only reads (it neither writes nor runs anything); rule: which rule decided, for the
    decision's reason and the audit line; secret_source: an argument names a file that holds credentials."""

    reads: bool
    rule: str
    secret_source: bool = False


def judge_arguments(rule: str, arguments: dict) -> ArgumentJudgement | None:
    """The judgement of one call under an argument rule ("sql:<param>", "shell:<param>", "code:<param>");
    None when ``rule`` is "" (the tool's risk does not lie in an argument)."""
    if not rule:
        return None
    kind, _, param = rule.partition(":")
    value = arguments.get(param) if isinstance(arguments, dict) else None
    if not isinstance(value, str) or not value.strip():
        return ArgumentJudgement(False, f"{kind}: argument '{_shown(param)}' missing or not a string")
    if kind == "shell":
        return judge_shell(value)
    judged = judge_sql(value) if kind == "sql" else ArgumentJudgement(
        False, f"{kind}: code is not analysed, every call asks")
    secrets = secret_path_kinds(value)
    if not secrets:
        return judged
    return ArgumentJudgement(judged.reads, f"{judged.rule}; names a secret path ({', '.join(secrets)})", True)


def _shown(text: str, cap: int = 40) -> str:
    """Foreign text inside a rule's single quotes (`errors.escaped`)."""
    return escaped(text, cap, quote="'")


# ------------------------------------------------------------------------------------------------ sql


def _reads(expr) -> tuple[bool, str]:
    """(only reads, the statement's kind) of one parsed sqlglot statement."""
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


# ------------------------------------------------------------------------------------------------ secret paths

_SECRET_NAMES = {  # a file's name (lower case) -> the kind of secret it holds
    **{n: "ssh key" for n in ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk",
                              "identity")},
    ".netrc": "netrc", "_netrc": "netrc", ".pgpass": "postgres password file",
    ".git-credentials": "git credentials", ".npmrc": "npm config", ".pypirc": "pypi config",
    ".envrc": "env file", ".vault-token": "vault token", "credentials.json": "credentials file",
    "application_default_credentials.json": "cloud credentials",
    "mcp.json": "MCP client config", ".mcp.json": "MCP client config",
    "claude_desktop_config.json": "MCP client config",
}
_SECRET_PAIRS = {  # (folder, file) -> kind
    (".aws", "credentials"): "aws credentials", (".aws", "config"): "aws config",
    (".docker", "config.json"): "docker config", (".kube", "config"): "kube config",
    ("etc", "shadow"): "system password file", ("etc", "gshadow"): "system password file",
    ("gh", "hosts.yml"): "github cli token",
}
_SECRET_DIRS = {".ssh": "ssh directory", ".gnupg": "gpg keyring", ".aws": "aws credentials"}
_SECRET_SUFFIXES = {".pem": "private key file", ".key": "private key file", ".p12": "private key file",
                    ".pfx": "private key file", ".ppk": "private key file", ".jks": "java keystore",
                    ".keystore": "java keystore", ".env": "env file"}
_SSH_PUBLIC = {"known_hosts", "known_hosts.old", "authorized_keys", "authorized_keys2", "config"}
_ENV_TEMPLATES = {"example", "sample", "template", "dist"}  # .env.example is written to be committed
_WORD_SPLIT = re.compile(r"[\s\"'`=,;|&<>()@:]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _component_kind(parts: list[str], i: int) -> str | None:
    """The secret kind of the path ``parts`` (lower-case components) at component ``i``, None if none."""
    name, folder = parts[i], parts[i - 1] if i else ""
    last = i == len(parts) - 1
    if folder in (".ssh", ".gnupg"):
        if folder == ".gnupg" or not (name in _SSH_PUBLIC or name.startswith("known_hosts") or
                                      name.endswith(".pub")):
            return "ssh key" if folder == ".ssh" else "gpg keyring"
    if last and name in _SECRET_DIRS:
        return _SECRET_DIRS[name]
    if (folder, name) in _SECRET_PAIRS:
        return _SECRET_PAIRS[(folder, name)]
    if name in _SECRET_NAMES:
        return _SECRET_NAMES[name]
    if name == ".env" or (name.startswith(".env.") and name[5:] not in _ENV_TEMPLATES):
        return "env file"
    stem, dot, suffix = name.rpartition(".")
    if dot and stem and f".{suffix}" in _SECRET_SUFFIXES:
        return _SECRET_SUFFIXES[f".{suffix}"]
    return None


def secret_path_kinds(text: str) -> list[str]:
    """The kinds of secret file (sorted, unique: "ssh key", "env file", ...) that ``text`` names: its words
    (split at spaces, quotes, ``=``, ``:``, ``@`` and shell operators) read as paths with ``/`` or ``\\``
    separators, matched on whole components (``environment.md`` is not ``.env``, ``keyboard.txt`` not
    ``*.key``). URLs other than ``file://`` name no local file and are skipped."""
    kinds = set()
    for chunk in text.split():
        if _URL.match(chunk) and not chunk.lower().startswith("file://"):
            continue
        for word in _WORD_SPLIT.split(chunk):
            parts = [p for p in re.split(r"[/\\]+", word.lower()) if p not in ("", ".")]
            kinds.update(k for i in range(len(parts)) if (k := _component_kind(parts, i)))
    return sorted(kinds)


# ------------------------------------------------------------------------------------------------ shell


@dataclass(frozen=True)
class ShellOptions:
    """What one program of the read-only table may be given. flags: short options without a value (combinable,
    ``-la``); values: short options that require one (``-n 5``, ``-n5``); attached: short options whose optional
    value can only be attached (``-U3``, ``-uno``); long_flags / long_values: ``--all`` / ``--lines=5`` or
    ``--lines 5`` (a long option in both takes its optional value only after "="); numeric: ``-5`` is allowed
    (head, tail, grep, git log); max_positional: how many operands at most (None: any); positional: a pattern
    every operand must match (date: +FORMAT); any_words: every word is an operand (echo)."""

    flags: str = ""
    values: str = ""
    long_flags: frozenset = field(default_factory=frozenset)
    long_values: frozenset = field(default_factory=frozenset)
    attached: str = ""
    numeric: bool = False
    max_positional: int | None = None
    positional: str | None = None
    any_words: bool = False


def _opts(flags="", values="", long_flags="", long_values="", **kw) -> ShellOptions:
    return ShellOptions(flags, values, frozenset(long_flags.split()), frozenset(long_values.split()), **kw)


_DIFF_OPTS = ("--stat --numstat --shortstat --name-only --name-status --summary --raw --patch --no-patch "
              "--no-color --color --no-ext-diff --no-textconv --patience --histogram --minimal --no-renames "
              "--ignore-all-space --ignore-space-change --ignore-blank-lines --no-prefix --word-diff --full-index "
              "--binary --abbrev --find-renames --find-copies --text --exit-code --quiet --check --unified "
              "--diff-filter --relative --dirstat")
_DIFF_VALUES = ("--unified --diff-filter --word-diff --color --abbrev --src-prefix --dst-prefix --relative "
                "--dirstat --stat --find-renames --find-copies")
_LOG_OPTS = (_DIFF_OPTS + " --oneline --all --branches --tags --remotes --graph --decorate --no-decorate "
             "--abbrev-commit --no-abbrev-commit --relative-date --reverse --first-parent --no-merges --merges "
             "--follow --topo-order --date-order --left-right --cherry-pick --boundary --full-history "
             "--simplify-by-decoration --pickaxe-all --regexp-ignore-case --all-match --invert-grep --pretty")
_LOG_VALUES = (_DIFF_VALUES + " --max-count --skip --since --until --after --before --author --committer "
               "--grep --format --pretty --date --decorate --branches --tags --remotes")

GIT_SUBCOMMANDS = {  # git's read-only subcommands; no global option but --no-pager / -P is allowed before them
    "status": _opts("sbvz", "", "--short --branch --porcelain --long --verbose --untracked-files --ignored "
                    "--no-column --ahead-behind --no-ahead-behind --renames --no-renames --show-stash",
                    "--porcelain --untracked-files --ignored", attached="u"),
    "log": _opts("psuwbiRz", "nSG", _LOG_OPTS, _LOG_VALUES, attached="UMC", numeric=True),
    "show": _opts("psuwbRz", "", _LOG_OPTS, _LOG_VALUES, attached="UMC"),
    "diff": _opts("puwbRz", "", _DIFF_OPTS + " --cached --staged --no-index", _DIFF_VALUES, attached="UMC"),
    "blame": _opts("weslftpcn", "L", "--porcelain --line-porcelain --root --show-stats --show-name "
                   "--show-number --show-email --abbrev", "--date --abbrev", attached="MC"),
    "rev-parse": _opts("q", "", "--abbrev-ref --short --verify --quiet --show-toplevel --git-dir "
                       "--absolute-git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository "
                       "--show-prefix --show-cdup --symbolic --symbolic-full-name --all --branches --tags "
                       "--git-common-dir --show-superproject-working-tree", "--short --abbrev-ref"),
    "ls-files": _opts("cdmoiskuztvf", "x", "--cached --deleted --modified --others --ignored --stage "
                      "--unmerged --killed --exclude-standard --directory --no-empty-directory --full-name "
                      "--error-unmatch --eol --debug --abbrev", "--exclude --abbrev --format"),
    "branch": _opts("avrl", "", "--all --remotes --list --show-current --verbose --no-color --color --merged "
                    "--no-merged --contains --no-contains", "--sort --format --merged --no-merged --contains "
                    "--no-contains --points-at --color", max_positional=0),
}

SHELL_COMMANDS = {
    "ls": _opts("1aAbBcCdfFghHiklLmnNopqQrRsStuUvxXZ", "IwT", "--all --almost-all --human-readable --recursive "
                "--reverse --size --directory --classify --inode --numeric-uid-gid --dereference "
                "--group-directories-first --full-time --si --author --escape --literal --no-group "
                "--kibibytes --color", "--color --sort --time-style --format --hide --ignore --block-size "
                "--indicator-style --quoting-style --time --width --tabsize"),
    "pwd": _opts("LP", max_positional=0),
    "cat": _opts("AbeEnstTuv", "", "--number --show-all --number-nonblank --squeeze-blank --show-ends "
                 "--show-tabs --show-nonprinting"),
    "head": _opts("qvz", "nc", "--quiet --silent --verbose --zero-terminated", "--lines --bytes", numeric=True),
    "tail": _opts("qvz", "nc", "--quiet --silent --verbose --zero-terminated", "--lines --bytes", numeric=True),
    "wc": _opts("cmlLw", "", "--bytes --chars --lines --max-line-length --words"),
    "grep": _opts("EFGPiyvwxcLloqsbHhnTZzrRaIU", "emABCdD", "--extended-regexp --fixed-strings --basic-regexp "
                  "--perl-regexp --ignore-case --no-ignore-case --invert-match --word-regexp --line-regexp "
                  "--count --files-without-match --files-with-matches --only-matching --quiet --silent "
                  "--no-messages --byte-offset --with-filename --no-filename --line-number --initial-tab --null "
                  "--null-data --recursive --dereference-recursive --text --binary --color --colour",
                  "--regexp --max-count --after-context --before-context --context --include --exclude "
                  "--exclude-dir --color --colour --label --directories --devices --binary-files", numeric=True),
    "rg": _opts("iSsvwxclnNHoFUuLP0", "gtTeABCmM", "--hidden --no-ignore --files --json --count "
                "--files-with-matches --files-without-match --line-number --no-line-number --no-heading "
                "--heading --fixed-strings --word-regexp --line-regexp --ignore-case --smart-case "
                "--case-sensitive --multiline --pcre2 --follow --trim --vimgrep --only-matching --invert-match "
                "--no-messages --with-filename --no-filename --count-matches --stats --color",
                "--glob --iglob --type --type-not --regexp --max-depth --color --sort --sortr --max-columns "
                "--after-context --before-context --context --max-count --max-filesize"),
    "find": None,  # find's expression is its own language: `_find_problem`
    "echo": _opts(any_words=True),
    "date": _opts("uR", "dr", "--utc --universal --rfc-email --iso-8601", "--date --reference --iso-8601 "
                  "--rfc-3339", positional=r"\+.*"),
    "whoami": _opts(max_positional=0),
    "uname": _opts("asnrvmpio", "", "--all --kernel-name --nodename --kernel-release --kernel-version "
                   "--machine --processor --hardware-platform --operating-system", max_positional=0),
    "which": _opts("a"),
    "stat": _opts("LftF", "c", "--dereference --file-system --terse", "--format --printf"),
    "du": _opts("abchkmsxLPHlS0", "dt", "--all --apparent-size --bytes --total --human-readable --si "
                "--summarize --one-file-system --dereference --count-links --separate-dirs --null",
                "--max-depth --exclude --threshold --block-size"),
    "df": _opts("ahHiklPT", "tx", "--all --human-readable --si --inodes --local --portability --print-type "
                "--total", "--type --exclude-type --block-size"),
    "file": _opts("bihLkrNsE0", "F", "--brief --mime --mime-type --mime-encoding --dereference "
                  "--no-dereference --keep-going --raw --special-files --no-pad --print0", "--separator"),
    "tree": _opts("adlfxisphugDFqNQrtcvUCnJX", "LPI", "--noreport --dirsfirst --du --prune --gitignore "
                  "--matchdirs --ignore-case", "--charset --filelimit --sort --timefmt"),
    "sort": _opts("bdfgiMhnRrVcCmsuz", "ktS", "--ignore-leading-blanks --dictionary-order --ignore-case "
                  "--general-numeric-sort --ignore-nonprinting --month-sort --human-numeric-sort "
                  "--numeric-sort --random-sort --reverse --version-sort --check --merge --stable --unique "
                  "--zero-terminated", "--key --field-separator --buffer-size --parallel --sort --check"),
    "uniq": _opts("cdDiuz", "fsw", "--count --repeated --ignore-case --unique --zero-terminated --group "
                  "--all-repeated",
                  "--skip-fields --skip-chars --check-chars --group --all-repeated", max_positional=1),
    "diff": _opts("qsucyibwBEZaNTtpr", "UCWx", "--brief --report-identical-files --unified --context "
                  "--side-by-side --ignore-case --ignore-space-change --ignore-all-space --ignore-blank-lines "
                  "--text --recursive --new-file --strip-trailing-cr --show-c-function --expand-tabs "
                  "--initial-tab --suppress-common-lines --color --minimal", "--unified --context --width "
                  "--exclude --label --color"),
}
_FIND_VALUE = set("-name -iname -path -ipath -wholename -iwholename -regex -iregex -type -xtype -size -mtime "
                  "-mmin -atime -amin -ctime -cmin -newer -anewer -cnewer -perm -user -group -uid -gid -links "
                  "-inum -samefile -lname -ilname -used -maxdepth -mindepth -regextype -printf -fstype".split())
_FIND_BARE = set("-empty -readable -writable -executable -nouser -nogroup -true -false -depth -mount -xdev "
                 "-follow -noleaf -daystart -ignore_readdir_race -print -print0 -ls -prune -quit -not -and -or "
                 "-a -o ! ( ) , -H -L -P".split())
_SYSTEM_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/opt/homebrew/bin/")


def _option_problem(opts: ShellOptions, args: list[str]) -> str | None:
    """The first option or operand of ``args`` that ``opts`` does not allow, as "option '-o'" (None: all are
    allowed). A value in the next word is taken only when it does not start with "-": such a word is checked as
    an option, so a wrong guess about an option's value can hide an operand but never an option."""
    if opts.any_words:
        return None
    operands, i = [], 0
    while i < len(args):
        a, i = args[i], i + 1
        if a == "--":
            operands += args[i:]
            break
        takes_next = False
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            if name in opts.long_values and (eq or name not in opts.long_flags):
                takes_next = not eq
            elif eq or name not in opts.long_flags:
                return f"option '{_shown(name)}'"
        elif a.startswith("-") and len(a) > 1 and not (opts.numeric and re.fullmatch(r"-\d+", a)):
            for j, c in enumerate(a[1:], 1):
                if c in opts.values or c in opts.attached:
                    takes_next = c in opts.values and not a[j + 1:]
                    break
                if c not in opts.flags:
                    return f"option '-{_shown(c)}'"
        elif not a.startswith("-") or len(a) == 1:
            operands.append(a)
        if takes_next and i < len(args) and not args[i].startswith("-"):
            i += 1
    if opts.max_positional is not None and len(operands) > opts.max_positional:
        return f"operand '{_shown(operands[opts.max_positional])}'"
    bad = [w for w in operands if opts.positional and not re.fullmatch(opts.positional, w)]
    return f"operand '{_shown(bad[0])}'" if bad else None


def _find_problem(args: list[str]) -> str | None:
    """The first primary of a find expression outside the read-only ones (None: all read)."""
    i = 0
    while i < len(args):
        a, i = args[i], i + 1
        if a in _FIND_VALUE or re.fullmatch(r"-newer[aBcm][aBcmt]", a):
            i += 1
        elif (a.startswith("-") or a in ("!", "(", ")", ",")) and a not in _FIND_BARE:
            return f"'{_shown(a)}'"
    return None


def _program(word: str) -> str:
    """The program a command word runs: its name for a bare name or one in a system bin folder (/usr/bin/ls),
    else the word itself (``./ls`` is not ls)."""
    folder, _, name = word.rpartition("/")
    return name if f"{folder}/" in _SYSTEM_BIN else word


def _command_problem(words: list[str]) -> tuple[str | None, str]:
    """(why the simple command ``words`` may write or run something, or None; the program's name)."""
    prog = _program(words[0])
    if prog == "git":
        args = words[1:]
        while args and args[0] in ("--no-pager", "-P"):
            args = args[1:]
        sub = args[0] if args else ""
        if sub not in GIT_SUBCOMMANDS:
            return f"'git {_shown(sub)}' is not a known read-only git command", "git"
        problem = _option_problem(GIT_SUBCOMMANDS[sub], args[1:])
        return (f"git {sub} with {problem}" if problem else None), f"git {sub}"
    if prog not in SHELL_COMMANDS:
        return f"'{_shown(prog)}' is not a known read-only command", prog
    opts = SHELL_COMMANDS[prog]
    problem = _find_problem(words[1:]) if opts is None else _option_problem(opts, words[1:])
    return (f"{prog} with {problem}" if problem else None), prog


_NODE_REASONS = {
    "list": "several commands (;, &&, ||, &)", "compound": "a subshell, group or control structure",
    "function": "a function definition", "redirect": "a redirection", "heredoc": "a here-document",
    "assignment": "an assignment (FOO=bar cmd)", "commandsubstitution": "a command substitution",
    "processsubstitution": "a process substitution", "parameter": "a parameter expansion",
    "reservedword": "a shell keyword", "pipeline": "a nested pipeline", "arithmetic": "an arithmetic expansion",
}


def _expands_to_option(raw: str) -> bool:
    """Whether a word's source text starts with an unquoted glob or brace (after empty quotes), which the shell
    may expand to a file named like an option (``*`` -> ``-o``). ``src/*`` cannot: it starts with "src/"."""
    while raw[:2] in ('""', "''"):
        raw = raw[2:]
    return raw[:1] in ("*", "?", "[") or (raw[:1] == "{" and ("," in raw or ".." in raw))  # {} stays "{}"


def _stage_words(stage, command: str) -> tuple[list[str] | None, str]:
    """(the words of one pipeline stage, or None; why it is not one plain simple command)."""
    if stage.kind != "command":
        return None, _NODE_REASONS.get(stage.kind, f"a {stage.kind}")
    words = []
    for part in stage.parts:
        if part.kind != "word":
            return None, _NODE_REASONS.get(part.kind, f"a {part.kind}")
        inner = [n.kind for n in getattr(part, "parts", []) if n.kind != "tilde"]
        if inner:
            return None, _NODE_REASONS.get(inner[0], f"a {inner[0]}")
        if _expands_to_option(command[part.pos[0]:part.pos[1]]):
            return None, f"a glob that may expand to an option ('{_shown(part.word)}')"
        words.append(part.word)
    return words, ""


def _shell_stages(command: str) -> tuple[list[list[str]] | None, str]:
    """(the words of each stage of one command or pipeline, or None; why not)."""
    if not command.strip():
        return None, "no command"
    try:
        nodes = bashlex.parse(command)
    except Exception as e:  # bashlex raises ParsingError, NotImplementedError, AttributeError on odd input
        return None, f"not parsed ({_shown(str(e).splitlines()[0] if str(e) else type(e).__name__, 60)})"
    if len(nodes) != 1:
        return None, f"{len(nodes)} commands"
    node = nodes[0]
    stages = [p for p in node.parts if p.kind != "pipe"] if node.kind == "pipeline" else [node]
    out = []
    for stage in stages:
        words, why = _stage_words(stage, command)
        if words is None:
            return None, why
        out.append(words)
    return out, ""


def judge_shell(command: str) -> ArgumentJudgement:
    """One simple command (or a pipeline of them) whose program is in `SHELL_COMMANDS` (or a read-only git
    subcommand) and whose every option is allowed reads; anything else does not. secret_source: one of its
    words (the whole text when it is not parsed) names a secret file (`secret_path_kinds`)."""
    stages, problem = _shell_stages(command)
    words = [w for stage in stages or [] for w in stage] if stages is not None else [command]
    secrets = sorted({k for w in words for k in secret_path_kinds(w)})
    prog = ""
    for stage in stages or []:
        problem, prog = _command_problem(stage)
        if problem:
            break
    if problem:
        note = f"; names a secret path ({', '.join(secrets)})" if secrets else ""
        return ArgumentJudgement(False, f"shell: {problem}{note}", bool(secrets))
    if secrets:
        return ArgumentJudgement(True, f"shell: reads a secret path ({', '.join(secrets)})", True)
    if len(stages) == 1:
        return ArgumentJudgement(True, f"shell: one read-only command ({prog})")
    return ArgumentJudgement(True, f"shell: a pipeline of read-only commands "
                                   f"({' | '.join(_command_problem(s)[1] for s in stages)})")


READ_ONLY_COMMANDS = frozenset(SHELL_COMMANDS)  # the programs of the table, for callers of the earlier rule

__all__ = ["ArgumentJudgement", "GIT_SUBCOMMANDS", "READ_ONLY_COMMANDS", "SHELL_COMMANDS", "ShellOptions",
           "judge_arguments", "judge_shell", "judge_sql", "secret_path_kinds"]
