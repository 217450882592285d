"""Risk by what a tool does: six dimensions per tool, each with its source, and the level 1..5 they give.

Dimensions (docs/registry.md, "Risk dimensions"; the labelling rubric is docs/risk_rubric.md):

* ``mutation``: "read", "local_write" (a local, reversible change) or "destructive" (destructive, irreversible,
  or of unknown reach);
* ``public_sink``: changes remote or shared state, or sends to other people (push, merge, post, publish, ...);
* ``secret_source``: returns credentials, tokens, keys, connection strings, environment variables;
* ``untrusted_content``: returns content written by others (web pages, search results, issues, e-mails);
* ``execution``: runs code, shell commands or write-capable queries;
* ``money``: moves money or buys.

Where each value comes from, in order (a later step only raises):

1. **mutation.** A trusted server's explicit annotations decide it (``readOnlyHint: true`` read;
   ``readOnlyHint: false`` with ``destructiveHint: false`` local_write; else destructive). For an MCP tool of an
   untrusted server the specification's defaults hold — presumed not read-only, destructive and open-world
   (source "spec default: unannotated", or "spec default: untrusted readOnlyHint" when the server claims
   read-only) — and only the learned model's confident judgement brings it below the ask threshold (source
   "learned"): that it only reads (P(writes) and P(destructive) below ``read_threshold``; the default,
   ``learned_clears = "reads"``), or, with ``learned_clears = "reversible"``, also that it neither destroys nor
   is a public sink, secret source, execution or money tool (each probability below
   ``destructive_threshold``: a local reversible write). An explicit
   ``readOnlyHint: false`` is evidence of a write: no learned judgement makes it read. Tools of formats without
   annotations (OpenAI, Anthropic, plain) take the model's judgement at 0.5 (read / local_write / destructive),
   and local_write without a model. ``destructiveHint: true`` and the "destructive" keywords raise it to
   destructive.
2. **the five flags.** True when the keyword table `DIMENSION_KEYWORDS` matches the tool's name or the first
   sentence of its description (`floor_text`; untrusted_content: the whole description) — never its parameters
   or the later sentences, where boilerplate lives: an ``auth-method`` parameter that mentions credentials, "use
   list-accounts before delete-account", "the list may be empty" (source "keywords:<the words matched>"); the
   learned model still reads the whole text as features — or when the learned model's probability reaches
   ``flag_threshold`` (source "learned") — except a learned public sink on a trusted server's read-only tool
   (a public sink changes state; the trusted annotation says it changes nothing).

`level_from_dimensions` is the one function from dimensions to the level: money 5; destructive, public sink,
secret source or execution 4; a local write 3; a read of untrusted content 2; a read 1. At the gateway's default
``allow_level`` 3, reads and local reversible writes pass and everything else asks.

Tools whose risk lies in their arguments (SQL, shell commands, code; `argument_rule`) are decided per call by
`riskrank_jax.registry.arguments`.

Why a separate rule from `riskrank_jax.registry.risk.assess_risk`: that rule gives the paper's levels (kept for
the benchmark paths and available with an explicit ``--risk-head``); this one is what user registries get.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from riskrank_jax.permissions import CATEGORY_NAMES, split_identifier
from riskrank_jax.registry.permissions import permission_mask_words
from riskrank_jax.registry.poisoning import detect, sibling_names
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.risk import RISK_KEYWORDS, RiskAssessment, clause_lines, group_regexes

MUTATIONS = ("read", "local_write", "destructive")
FLAGS = ("public_sink", "secret_source", "untrusted_content", "execution", "money")
DIMENSIONS = ("mutation",) + FLAGS
# what the policy can name: the mutation values other than read, the flags, and instructions aimed at the agent
INSTRUCTIONS = "agent_instructions"
DIMENSION_NAMES = ("local_write", "destructive") + FLAGS + (INSTRUCTIONS,)
MUST_CONFIRM = ("destructive", "public_sink", "secret_source", "execution", "money")
DEFAULT_ALLOW_LEVEL = 3  # the highest level a gateway lets through unconfirmed by default (serve.policy)
_CLEAR_FLAGS = ("public_sink", "secret_source", "execution", "money")
LEARNED_CLEARS = ("reads", "reversible")
TRUSTED_READ = "mcp:readOnlyHint=true (trusted)"
# the learned model's outputs, in order (riskrank_jax.registry.mcp_risk)
MODEL_OUTPUTS = ("writes", "destructive") + FLAGS

# Keyword rules per dimension, in the syntax of risk.RISK_KEYWORDS, matched on the name and description only.
DIMENSION_KEYWORDS: dict[str, tuple[str, ...]] = {
    "destructive": RISK_KEYWORDS["delete"] + (
        "kill|terminate ... process|instance|server|job|container|pod|session|cluster",
        "revoke ... token|key|access|permission|invitation|certificate",
    ),
    "public_sink": (
        "^push|merge|publish|deploy|tweet|retweet|broadcast|post|send|share|comment|reply|forward|invite|notify|"
        "announce",
        ("send|post|forward|share ... email|e-mail|mail|message|sms|dm|invite|invitation|notification|reply|"
         "comment|tweet|newsletter"),
        ("create|open|submit|add|leave|write|file ... comment|issue|pull request|pr|tweet|review|release|gist|"
         "ticket|discussion"),
        "on ... behalf",
    ),
    "secret_source": (
        ("get|read|list|print|show|return|retrieve|fetch|dump|reveal|export|display|view|generate|create|issue|"
         "decrypt ... environment variable|env|env var|secret|credential|password|token|api key|access key|"
         "private key|ssh key|connection string|session cookie|kubeconfig|variable|connection info|connection "
         "information|connection details"),
        ("environment variables|env vars|connection string|private key|secret value|ci cd variables|"
         "pre authenticated|presigned url"),
    ),
    "untrusted_content": (
        "web page|webpage|website|html|web search|search results|scrape|crawl|browse|rss",
        ("fetch|read|get|download|open|retrieve|browse|scrape ... url|page|web|website|email|e-mail|mail|inbox|"
         "message|issue|comment|post|tweet|feed|article|transcript"),
        "search ... web|internet|news|emails|e-mails|mail|issues|messages|tweets|posts|reddit|twitter",
    ),
    # the verb-object rule of the exec group, not its single words ("bash", "eval" and "sql" name things too:
    # "the task's BashOperator", "the compiled SQL of a metric")
    "execution": ("code execution|arbitrary code|remote code|shell command|shell commands|terminal command",
                  RISK_KEYWORDS["exec"][1]),
    "money": RISK_KEYWORDS["money"],
}

_SQL_PARAMS = ("sql", "query", "statement", "sql_query", "sqlquery", "sql_statement")
_SHELL_PARAMS = ("command", "cmd", "shell_command", "commandline", "command_line")
_CODE_PARAMS = ("code", "script", "source", "source_code", "python_code", "program", "snippet")


@dataclass(frozen=True)
class DimensionPolicy:
    """How evidence sets the dimensions (module docstring). trusted_sources: sources (MCP servers) whose
    annotations are trusted (all with trust_annotations); flag_threshold: a flag is set at this probability.
    learned_clears: what the learned model may clear an untrusted MCP tool to — "reads": read when P(writes) is
    below read_threshold; "reversible": also local_write when P(destructive) and every must-confirm flag's
    probability are below destructive_threshold. The shipped model's file holds the thresholds chosen on the
    corpus (experiments/mcp_risk)."""

    trust_annotations: bool = False
    trusted_sources: tuple[str, ...] = ()
    read_threshold: float = 0.2
    flag_threshold: float = 0.35
    destructive_threshold: float = 0.0
    learned_clears: str = "reads"

    def __post_init__(self):
        if self.learned_clears not in LEARNED_CLEARS:
            raise ValueError(f"learned_clears must be one of {LEARNED_CLEARS}, got {self.learned_clears!r}")


@dataclass(frozen=True, eq=False)
class DimensionAssessment:
    """Per tool: mutation int8 [N] (index into MUTATIONS); flags bool [N, 5] (FLAGS order); sources: per tool,
    one source string per DIMENSIONS entry ("" for a flag that is not set by anything); levels int32 [N] from
    `level_from_dimensions`; probs float32 [N, 7] (MODEL_OUTPUTS; NaN without a model); argument_rules: per tool
    "sql:<param>", "shell:<param>", "code:<param>" or ""; instructions: per tool the source of the
    ``agent_instructions`` dimension ("detector: <categories>", `registry.poisoning`) or "" when none were
    found (empty tuple: not assessed)."""

    mutation: np.ndarray
    flags: np.ndarray
    sources: tuple[tuple[str, ...], ...]
    levels: np.ndarray
    probs: np.ndarray
    argument_rules: tuple[str, ...]
    instructions: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return int(self.mutation.shape[0])

    def row(self, i: int) -> dict:
        """{"mutation": {"value", "source"}, flag: {"value", "source"}, ..., "argument_rule": str|None} of one
        tool (JSON-ready)."""
        out = {"mutation": {"value": MUTATIONS[int(self.mutation[i])], "source": self.sources[i][0]}}
        for j, f in enumerate(FLAGS):
            out[f] = {"value": bool(self.flags[i, j]), "source": self.sources[i][j + 1] or None}
        src = self.instructions[i] if self.instructions else ""
        out[INSTRUCTIONS] = {"value": bool(src), "source": src or None}
        out["argument_rule"] = self.argument_rules[i] or None
        return out

    def active(self, i: int) -> tuple[str, ...]:
        """The dimension names (DIMENSION_NAMES) that hold for tool i."""
        m = MUTATIONS[int(self.mutation[i])]
        extra = (INSTRUCTIONS,) if self.instructions and self.instructions[i] else ()
        return ((m,) if m != "read" else ()) + tuple(f for j, f in enumerate(FLAGS) if self.flags[i, j]) + extra

    def source_text(self, i: int) -> str:
        """One line: the dimensions that hold with their sources, e.g. "destructive (spec default: unannotated),
        public_sink (keywords:push)"; a read names its mutation source: "read (learned)"."""
        return describe(self.row(i))


def describe(row: dict) -> str:
    """The one-line form of a dimension row (DimensionAssessment.row)."""
    parts = [f"{row['mutation']['value']} ({row['mutation']['source']})"]
    parts += [f"{f} ({row[f]['source']})" for f in FLAGS if row[f]["value"]]
    if (row.get(INSTRUCTIONS) or {}).get("value"):
        parts.append(f"{INSTRUCTIONS} ({row[INSTRUCTIONS]['source']})")
    return ", ".join(parts)


def level_from_dimensions(mutation, flags, instructions=None) -> np.ndarray:
    """The risk level of each tool from its dimensions: money 5; destructive, public sink, secret source,
    execution or instructions aimed at the agent 4; local write 3; a read of untrusted content 2; a read 1.

    Args:
      mutation: int [N], index into MUTATIONS; flags: bool [N, 5] in FLAGS order; instructions: bool [N] or None
      (none found).
    Returns:
      int32 [N] in 1..5.
    """
    mutation = np.asarray(mutation)
    flags = np.asarray(flags, bool).reshape(-1, len(FLAGS))
    f = {name: flags[:, j] for j, name in enumerate(FLAGS)}
    level = np.where(mutation == 2, 4, np.where(mutation == 1, 3, 1))
    level = np.where(f["untrusted_content"], np.maximum(level, 2), level)
    level = np.where(f["public_sink"] | f["secret_source"] | f["execution"], np.maximum(level, 4), level)
    if instructions is not None:
        level = np.where(np.asarray(instructions, bool), np.maximum(level, 4), level)
    return np.where(f["money"], 5, level).astype(np.int32)


def must_confirm(mutation, flags) -> np.ndarray:
    """bool [N]: destructive, or any of public sink, secret source, execution, money (mutation int [N], flags
    bool [N, 5])."""
    flags = np.asarray(flags, bool).reshape(-1, len(FLAGS))
    cols = [FLAGS.index(f) for f in ("public_sink", "secret_source", "execution", "money")]
    return (np.asarray(mutation) == 2) | flags[:, cols].any(axis=1)


# ------------------------------------------------------------------------------------------------ keywords


def head_text(text: str) -> str:
    """The name and description part of a tool_text (the parameters cut off)."""
    return text.split(" Parameters: ", 1)[0]


_SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<!etc\.)(?<=[.!?])\s+(?=[A-Z0-9`'\"(\[])|\n")


def floor_text(text: str) -> str:
    """The name and the first sentence of the description of a tool_text ("name: description ..."): what the
    tool does, where the keyword floors look. Why: later sentences hold usage notes that name other tools and
    caveats ("call find_folder before delete_email", "possibly empty"), which made reads ask."""
    name, sep, desc = head_text(text).partition(": ")
    return name + sep + _SENTENCE_END.split(desc.strip(), 1)[0] if sep else name


# nouns that read like the public-sink verbs: "Get a merge request", "List push notifications"
_SINK_NOUNS = re.compile(r"\b(?:merge|pull|push|post) +(?:requests?|notifications?|rules?|events?|mirrors?)\b")


def keyword_hits(texts) -> list[dict[str, str]]:
    """Per text: {dimension: the first words matched} for the DIMENSION_KEYWORDS that match its name and
    description (tool_text's " Parameters: " part is ignored)."""
    table = tuple((d, tuple(r)) for d, r in DIMENSION_KEYWORDS.items())
    regexes = group_regexes(table)
    out = []
    for t in texts:
        every, _ = clause_lines(head_text(t))
        hits = {}
        nouns = _SINK_NOUNS.sub("noun", every)
        for (d, _), (anywhere, opens) in zip(table, regexes):
            text = nouns if d == "public_sink" else every
            m = (anywhere.search(text) if anywhere is not None else None) or (
                opens.search(text) if opens is not None else None)
            if m is not None:
                hits[d] = " ".join(m.group(0).split())
        out.append(hits)
    return out


@lru_cache(maxsize=16)
def _cached_hits(texts: tuple[str, ...]) -> tuple[dict[str, str], ...]:
    """keyword_hits of the same texts, computed once (threshold searches assess one registry many times)."""
    return tuple(keyword_hits(texts))


# the flag whose keywords look at the whole description: saying anywhere that a tool returns others' content is
# enough (it only makes the session-flow rule hold more often)
_WHOLE_DESCRIPTION_FLAGS = ("untrusted_content",)


@lru_cache(maxsize=16)
def _floor_hits(texts: tuple[str, ...]) -> tuple[dict[str, str], ...]:
    """Per text, the keyword floors: DIMENSION_KEYWORDS matched on `floor_text` (name and first sentence), and
    for _WHOLE_DESCRIPTION_FLAGS on the whole name and description."""
    first = keyword_hits([floor_text(t) for t in texts])
    whole = _cached_hits(texts)
    return tuple({**{d: w for d, w in f.items() if d not in _WHOLE_DESCRIPTION_FLAGS},
                  **{d: w for d, w in h.items() if d in _WHOLE_DESCRIPTION_FLAGS}} for f, h in zip(first, whole))


READ_VERBS = frozenset(
    "get list search read fetch find show view describe lookup look query check count retrieve browse inspect "
    "explore scan analyze analyse summarize summarise preview validate ping status info stat stats calculate "
    "compare estimate lint diff log logs history print fetch resolve whoami".split())
WRITE_VERBS = frozenset(
    "create add update set put edit modify write insert upsert patch rename move copy upload save append prepend "
    "apply format style replace toggle enable disable start stop restart run execute exec trigger schedule assign "
    "archive close open reopen unresolve approve reject submit send post publish push merge deploy delete remove "
    "drop clear purge destroy cancel revoke kill terminate reset transfer pay buy sell invite share subscribe "
    "unsubscribe mark import sync install uninstall generate convert commit tag label lock unlock grant".split())
N_KEYWORD_FEATURES = 2 * len(DIMENSION_KEYWORDS) + 3


def _name_words(text: str) -> list[str]:
    """The words of a tool_text's name (before the first ':')."""
    return re.findall(r"[a-z]+", text.split(":", 1)[0].lower())


def keyword_features(texts) -> np.ndarray:
    """float32 [N, 15]: per dimension keyword table (6, DIMENSION_KEYWORDS order), 1 when it matches the name
    and description, and 1 when it matches the parameters only (6); then whether the name's first word is a
    reading verb, a writing verb, and whether any word of the name is a writing verb (3) — the learned model's
    keyword inputs."""
    heads = _cached_hits(tuple(texts))
    params = keyword_hits([t.split(" Parameters: ", 1)[1] if " Parameters: " in t else "" for t in texts])
    names = tuple(DIMENSION_KEYWORDS)
    out = np.zeros((len(texts), N_KEYWORD_FEATURES), np.float32)
    for i, (h, p) in enumerate(zip(heads, params)):
        for j, d in enumerate(names):
            out[i, j] = d in h
            out[i, len(names) + j] = d in p and d not in h
        words = _name_words(texts[i])
        k = 2 * len(names)
        out[i, k] = bool(words) and words[0] in READ_VERBS
        out[i, k + 1] = bool(words) and words[0] in WRITE_VERBS
        out[i, k + 2] = any(w in WRITE_VERBS for w in words)
    return out


def argument_rule(text: str, param_names) -> str:
    """"sql:<param>", "shell:<param>", "code:<param>" when the tool's risk lies in one argument (its name and
    description run SQL, shell commands or code, and it has a parameter of that kind), else ""."""
    words = split_identifier(head_text(text))
    names = {split_identifier(p).replace(" ", "_").strip("_"): p for p in param_names}
    if re.search(r"\b(sql|query|queries|select statements?)\b", words) and re.search(r"\bsql\b", split_identifier(text)):
        for p in _SQL_PARAMS:
            if p in names:
                return f"sql:{names[p]}"
    if re.search(r"\b(shell|bash|terminal|command|commands)\b", words):
        for p in _SHELL_PARAMS:
            if p in names:
                return f"shell:{names[p]}"
    if re.search(r"\b(code|python|javascript|script|scripts)\b", words):
        for p in _CODE_PARAMS:
            if p in names:
                return f"code:{names[p]}"
    return ""


@lru_cache(maxsize=16)
def _cached_rules(tools: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[str, ...]:
    """argument_rule of each (tool_text, parameter names), computed once per registry."""
    return tuple(argument_rule(text, params) for text, params in tools)


# ------------------------------------------------------------------------------------------------ assessment


def _mutation(tool, probs, trusted: bool, policy: DimensionPolicy) -> tuple[int, str]:
    """(index into MUTATIONS, source) before the keyword and destructiveHint raises."""
    a = tool.annotations
    p_writes, p_destr = (None, None) if probs is None or np.isnan(probs[0]) else (float(probs[0]), float(probs[1]))
    if a is not None and trusted and ("readOnlyHint" in a.declared or "destructiveHint" in a.declared):
        if a.declared_true("readOnlyHint"):
            return 0, TRUSTED_READ
        if "destructiveHint" in a.declared and not a.destructive:
            return 1, "mcp:destructiveHint=false (trusted)"
        return 2, ("mcp:destructiveHint=true" if a.declared_true("destructiveHint")
                   else "mcp:readOnlyHint=false, spec default: destructiveHint")
    if a is not None and not trusted:
        if "readOnlyHint" in a.declared and not a.read_only:
            return 2, "mcp:readOnlyHint=false" + ("" if "destructiveHint" in a.declared else
                                                  ", spec default: destructiveHint")
        if p_writes is not None and max(p_writes, p_destr) < policy.read_threshold:
            return 0, "learned"
        if (p_writes is not None and policy.learned_clears == "reversible" and max(
                p_destr, *(float(probs[MODEL_OUTPUTS.index(f)]) for f in _CLEAR_FLAGS)) < policy.destructive_threshold):
            return 1, "learned"
        return 2, ("spec default: untrusted readOnlyHint" if a.declared_true("readOnlyHint")
                   else "spec default: unannotated")
    # no annotations to go by (other formats), or a trusted server that sent no mutation hint
    if p_writes is None:
        return 1, "default: no annotations, no model"
    if p_writes < 0.5:
        return 0, "learned"
    return (2 if p_destr >= 0.5 else 1), "learned"


def assess_dimensions(registry: Registry, probs=None, policy: DimensionPolicy = DimensionPolicy()) -> DimensionAssessment:
    """Dimensions, sources and levels of every tool (module docstring).

    Args:
      registry: the tools.
      probs: float [N, 7] in [0, 1] from the learned model (MODEL_OUTPUTS order), or None.
      policy: thresholds and which servers' annotations are trusted.
    """
    n = registry.size
    p = np.full((n, len(MODEL_OUTPUTS)), np.nan, np.float32) if probs is None else np.asarray(probs, np.float32)
    if p.shape != (n, len(MODEL_OUTPUTS)):
        raise ValueError(f"probs must be [{n}, {len(MODEL_OUTPUTS)}], got {p.shape}")
    hits = _floor_hits(tuple(registry.texts))
    rules = _cached_rules(tuple((text, tuple(name for name, _ in t.params))
                                for text, t in zip(registry.texts, registry.tools)))
    mutation = np.zeros(n, np.int8)
    flags = np.zeros((n, len(FLAGS)), bool)
    sources = []
    for i, t in enumerate(registry.tools):
        trusted = policy.trust_annotations or t.source in policy.trusted_sources
        m, msrc = _mutation(t, None if probs is None else p[i], trusted, policy)
        a = t.annotations
        presumed = m < 2 or msrc.startswith(("spec default", "learned"))  # evidence replaces a presumption
        if a is not None and a.declared_true("destructiveHint") and not a.declared_true("readOnlyHint") and presumed:
            m, msrc, presumed = 2, "mcp:destructiveHint=true", False
        if "destructive" in hits[i] and presumed:
            m, msrc = 2, f"keywords:{hits[i]['destructive']}"
        row = [msrc]
        for j, f in enumerate(FLAGS):
            if f in hits[i]:
                flags[i, j], src = True, f"keywords:{hits[i][f]}"
            elif probs is not None and p[i, j + 2] >= policy.flag_threshold and not (
                    f == "public_sink" and msrc == TRUSTED_READ):  # a trusted read-only tool changes nothing
                flags[i, j], src = True, "learned"
            else:
                src = ""
            row.append(src)
        mutation[i] = m
        sources.append(tuple(row))
    instructions = instruction_sources(registry)
    levels = level_from_dimensions(mutation, flags, [bool(x) for x in instructions])
    return DimensionAssessment(mutation, flags, tuple(sources), levels, p, rules, instructions)


def instruction_sources(registry: Registry) -> tuple[str, ...]:
    """Per tool "detector: <categories>" when its name, description or parameters carry instructions aimed at
    the agent (`registry.poisoning.detect`; its own source's tool names are its siblings, another source's count
    as other servers' tools), else ""."""
    names = sibling_names((t.source, t.raw_name) for t in registry.tools)
    out = []
    for t in registry.tools:
        own, others = names[t.source]
        schema = {"type": "object", "properties": {n: ({"description": d} if d else {}) for n, d in t.params}}
        found = detect(t.raw_name, t.description, schema, others, own_tool_names=own)
        out.append("" if found is None else f"detector: {', '.join(found.categories)}")
    return tuple(out)


def assessment_to_risk(registry: Registry, dims: DimensionAssessment):
    """The `RiskAssessment` (levels, sources, scores ...) of a dimension assessment: a tool's declared ``risk``
    stays final (source "declared"); every other level is `level_from_dimensions`, its source the dimensions'
    one line (`DimensionAssessment.source_text`); learned: the model's highest must-confirm probability
    (P(destructive), public sink, secret source, execution, money; NaN without a model); scores (r − 1)/4."""
    declared = np.array([0 if r is None else r for r in registry.declared_risk], np.int32)
    levels = np.where(declared > 0, declared, dims.levels).astype(np.int32)
    cols = [MODEL_OUTPUTS.index(c) for c in MUST_CONFIRM]
    learned = dims.probs[:, cols].max(axis=1).astype(np.float32)
    mask = permission_mask_words(registry.texts)
    cats = tuple(tuple(c for c, hit in zip(CATEGORY_NAMES, row) if hit) for row in mask)
    groups = tuple(tuple(d for d in DIMENSION_NAMES if d in dims.active(i)) for i in range(registry.size))
    sources = tuple(("declared",) if declared[i] else (dims.source_text(i),) for i in range(registry.size))
    return RiskAssessment(levels, sources, cats, learned, ((levels - 1) / 4.0).astype(np.float32), groups, dims)


__all__ = ["DEFAULT_ALLOW_LEVEL", "MUTATIONS", "FLAGS", "DIMENSIONS", "DIMENSION_NAMES", "MUST_CONFIRM", "MODEL_OUTPUTS",
           "DIMENSION_KEYWORDS", "DimensionPolicy", "DimensionAssessment", "assess_dimensions",
           "level_from_dimensions", "must_confirm", "keyword_hits", "keyword_features", "N_KEYWORD_FEATURES", "argument_rule",
           "describe", "head_text", "floor_text", "assessment_to_risk", "INSTRUCTIONS", "instruction_sources"]
