"""What a request asks a tool to do: its needed effects, each with a confidence and a source, and the exposure
weight that holds back the tools whose effects it did not ask for.

    eff = tool_effects(dimension_rows)                      # bool [N, E]: what each tool does (EFFECTS order)
    needs = request_needs(texts, learned, agree)            # RequestNeeds: need float32 [Q, E] and sources
    w = exposure_weight(needs.need, eff, strength, relief)  # float32 [Q, N]: multiplies λ·f_risk

The effects (``EFFECTS``) are the tool dimensions that change something or reach beyond the request
(``registry.dimensions``): a local write, a deletion, sending to others, reading a secret, running code, moving
money. A request that needs none of them only reads.

A request's need of effect e is the highest of three sources, each recorded:

* **keywords** (``REQUEST_KEYWORDS``): the request says it ("delete", "send ... to", "api key", "pay"), at
  confidence ``KEYWORD_CONFIDENCE``;
* **learned**: P(e | request) of the intent model (``model.intent_model``), a logistic regression over the
  request's words, trained on benchmark requests labelled by their gold tools' effects;
* **agreement**: the share of the first stage's top ``AGREEMENT_TOP`` tools that have effect e, times the
  config's agreement weight (0 turns it off) and times how surely the request's words ask for any change (the
  highest of the other two sources) — once its words say it changes something, the tools it matches best say
  which change; they never make a read request a write.

Exposure by intent: a tool's penalty λ·f_risk is multiplied by

    w(q, t) = 1 + strength · unasked(q, t) − relief · asked(q, t)

with unasked(q, t) = (1 − any(q)) + any(q) · specific · max over t's effects e of (1 − cover(q, e)) for a tool with
effects (0 for a tool without), any(q) the request's highest need, and asked = 1 − unasked for a tool with
effects (0 for a tool without). cover(q, e) is need(q, e), except that a local write is covered by any effect the
request asks for (sending, deleting, paying all change something). A tool of a read request that can send is
pushed down by (1 + strength)·λ·f_risk; the send tool of a send request by (1 − relief)·λ·f_risk; its delete tool
by (1 + specific·strength)·λ·f_risk. λ keeps its meaning as the overall strength (strength = relief = 0 is the
plain penalty).

Held back (``held_back``, by policy): a must-confirm tool (``tool_must_confirm``), for a request that asks for no
change.

Why effects, not levels: the level says how dangerous a tool is; only the effects say whether this request asked
for that danger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.permissions import split_identifier

EFFECTS = ("local_write", "destructive", "public_sink", "secret_source", "execution", "money")
# how an explanation names each effect ("held back: sends to others; the request only reads")
EFFECT_WORDS = {"local_write": "changes data", "destructive": "deletes or destroys", "public_sink": "sends to others",
                "secret_source": "reads secrets", "execution": "runs code", "money": "moves money"}
ASK_WORDS = {"local_write": "change data", "destructive": "delete", "public_sink": "send to others",
             "secret_source": "read a secret", "execution": "run code", "money": "move money"}
KEYWORD_CONFIDENCE = 0.9
AGREEMENT_TOP = 3
ASKED = 0.5  # a need at or above this counts as asked in explanations
HOLD_OFFSET = 1e4  # what a held-back tool's score loses: below every tool that is not held back

_W = r"(?:a|an|the|this|that|my|our|your|their|some|all|these|those|it|them)"
# Request phrasings per effect (lower-cased words separated by single spaces, ``normalise_request``).
REQUEST_KEYWORDS: dict[str, tuple[str, ...]] = {
    "destructive": (
        r"\b(?:delete|deletes|deleting|remove|removes|removing|erase|wipe|purge|destroy|uninstall|get rid of|"
        r"kill|terminate|revoke|unsubscribe|overwrite|truncate)\b",
        rf"\b(?:drop|cancel|clear|empty|discard) {_W}\b", r"\bdrop (?:table|database|column|index)\b",
        r"\bclean up\b", r"\bforce push", r"\broll ?back\b", r"\b(?:replace|rewrite) the (?:whole|entire)\b",
        r"\brestore\b.*\bbackup\b", r"\b(?:shut ?down|power (?:\w+ )?(?:off|down)|decommission\w*)\b",
        r"\bformat (?:a |the |my |this |that )?(?:\w+ )?(?:disk|drive|partition|volume|card)\b",
        r"\bclose (?:my|the|our|this|that) (?:\w+ )?(?:account|repository|repo)\b",
    ),
    "local_write": (
        r"\b(?:create|creates|creating|add|adds|adding|write|writes|save|update|updates|updating|edit|modify|rename|"
        r"insert|append|upsert|store|upload|install|register|schedule|book|archive|assign|replace|"
        r"enable|disable|reset|import|mkdir|bookmark|rearrange|reorder|restore|apply|patch|configure|fill in|"
        r"set up|change|changes|move|copy|record|mark|label|tag|note down)\b",
        rf"\b(?:set|put|make|log|fix|start|stop|restart|open|close|lock|unlock|mute|rate) {_W}\b",
        r"\b(?:make|keep) a (?:note|record|copy|folder|file|directory)\b",
        r"^commit\b", r"\bcommit (?:the|my|these|this|all|it|them|changes|everything)\b",
    ),
    "public_sink": (
        r"\b(?:send|sends|sending|tweet|retweet|broadcast|announce|notify|forward|invite|publish|deploy|merge)\b",
        r"^(?:please )?e ?mail\b", r"\be ?mail (?:it|this|that|them|him|her|everyone|the team|to)\b",
        r"\b(?:reply|respond|answer) (?:to|in|on|with|that|saying)\b",
        rf"\b(?:post|share|push|message|text|comment|ping|tell|inform|alert) {_W}\b",
        r"\b(?:post|share|push|comment) (?:to|on|in)\b",
        r"\b(?:open|create|file|submit|raise|leave) (?:a |an )?(?:new )?(?:issue|pull request|pr|ticket|review|"
        r"comment|release|gist)\b",
    ),
    "secret_source": (
        r"\b(?:passwords?|credentials?|api keys?|access keys?|secret keys?|private keys?|ssh keys?|secrets?|"
        r"tokens?|env vars?|environment variables?|connection strings?|kubeconfig|passphrase)\b",
    ),
    "execution": (
        r"\b(?:execute|executes|executing|exec|eval|shell|terminal|bash|powershell|script|scripts)\b",
        r"\brun (?:this|the|a|my|some|these)? ?(?:code|command|commands|script|python|query|sql|program|snippet|"
        r"test|tests|notebook|function)\b",
        r"\b(?:command line|python code|sql (?:query|statement)|javascript code)\b",
    ),
    "money": (
        r"\b(?:pay|pays|paying|purchase|buy|buys|buying|refund|checkout|donate|subscribe)\b",
        r"\bbook (?:me |us )?(?:on |a |an |the )?(?:\w+ ){0,5}(?:flight|flights|hotel|ticket|tickets|seat|seats|"
        r"room|trip|ride|taxi|cab|car)\b",
        r"\b(?:transfer|send) (?:\$|€|£|usd|eur|money|funds|cash|\d)",
        rf"\border {_W}\b", r"\bplace an? order\b",
    ),
}
_REQUEST_REGEX = {e: re.compile("|".join(f"(?:{p})" for p in REQUEST_KEYWORDS[e])) for e in EFFECTS}
# A clause that says what not to do, or what may happen later, asks for nothing: "don't move any money yet",
# "lint it without running it", "before anyone deletes it", "I might cancel some later".
_NEGATED = re.compile(
    r"\b(?:not|never|no need|dont|don t|do not|doesn t|won t|without|nor|before (?:i|we|anyone|you|they|someone)|"
    r"whether to|whether i|might|may later|later|yet|instead of|rather than|no changes?|read only|only read|"
    r"only look|just look|just show|just tell)\b")
# quoted text is what a tool is to write or look for, not what the request asks it to do: "post 'deploy done' in #ops"
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+")
_QUOTED = re.compile(r"\"[^\"]{0,200}\"|“[^”]{0,200}”|‘[^’]{0,200}’|(?<![A-Za-z])'[^']{1,200}'(?![A-Za-z])")
_CLAUSE = re.compile(r"[.;,:!?()\n]+|\b(?:but|and then|then|so that|so)\b")


def normalise_request(text: str) -> str:
    """Lower-cased words of a request separated by single spaces (identifiers split: "deleteRepo" -> "delete
    repo"; "don't" -> "don t"), with "$", "€", "£" kept, quoted text left out ("post 'deploy done' in #ops" ->
    "post in ops"), a URL read as the word "url", and the clauses that say what not to do left out
    from its first cue on ("check my balance before I send Sam anything; don't move any money yet" -> "check my
    balance"): what the keywords and the learned
    model's features read."""
    kept = []
    text = _QUOTED.sub(" ", _URL.sub(" url ", text))
    for clause in _CLAUSE.split(split_identifier(text).replace("-", " ").replace("'", " ").replace("’", " ")):
        words = " ".join(re.sub(r"[^a-z0-9$€£ ]+", " ", clause).split())
        cue = _NEGATED.search(words)
        words = words[:cue.start()].strip() if cue else words
        if words:
            kept.append(words)
    return " ".join(kept)


def keyword_needs(texts) -> tuple[np.ndarray, list[dict[str, str]]]:
    """(bool [Q, E]: REQUEST_KEYWORDS of effect e match request q, per request {effect: the words matched})."""
    hits = np.zeros((len(texts), len(EFFECTS)), bool)
    words: list[dict[str, str]] = []
    for i, text in enumerate(texts):
        norm, found = normalise_request(text), {}
        for j, e in enumerate(EFFECTS):
            m = _REQUEST_REGEX[e].search(norm)
            if m is not None:
                hits[i, j], found[e] = True, m.group(0).strip()
        words.append(found)
    return hits, words


def tool_effects(rows) -> np.ndarray:
    """bool [N, E] from one dimension row per tool (``registry.dimensions.DimensionAssessment.row``).

    A destructive mutation whose only evidence is the MCP specification's default for an unannotated or
    untrusted tool counts here as a local write: a write request covers it (its level and the gate's decision
    stay what the dimensions say). Running code is not an effect of a tool whose SQL argument the gateway judges
    per call (``argument_rule`` "sql:…": a read-only query passes, a write asks), so "how many rows are in the
    orders table" keeps its query tool."""
    out = np.zeros((len(rows), len(EFFECTS)), bool)
    for i, row in enumerate(rows):
        mutation, source = row["mutation"]["value"], row["mutation"]["source"] or ""
        if mutation == "destructive" and not source.startswith("spec default"):
            out[i, EFFECTS.index("destructive")] = True
        elif mutation != "read":
            out[i, EFFECTS.index("local_write")] = True
        for e in EFFECTS[2:]:
            out[i, EFFECTS.index(e)] = bool(row[e]["value"])
        if (row.get("argument_rule") or "").startswith("sql:"):  # decided per call, on the query's text
            out[i, EFFECTS.index("execution")] = False
    return out


def tool_must_confirm(rows) -> np.ndarray:
    """bool [N]: whether each tool (one dimension row per tool) is one the hold-back keeps from a read request —
    destructive (by evidence, or by the MCP specification's presumption for an unannotated or untrusted tool unless
    the gateway judges its SQL per call), a public sink, a secret source, code (the same exception) or money."""
    eff = tool_effects(rows)
    presumed = np.array([row["mutation"]["value"] == "destructive"
                         and not (row.get("argument_rule") or "").startswith("sql:") for row in rows], bool)
    return eff[:, 1:].any(axis=1) | presumed if len(rows) else np.zeros(0, bool)


def agreement(first_scores, effects, top: int = AGREEMENT_TOP) -> np.ndarray:
    """float32 [Q, E]: the share of each request's first-stage top ``top`` tools (scores [Q, N], ties to the
    lower index) that have each effect (effects bool [N, E])."""
    scores = np.asarray(first_scores, np.float32)
    top = min(top, scores.shape[1])
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :top]
    return np.asarray(effects, np.float32)[idx].mean(axis=1)


@dataclass(frozen=True)
class RequestNeeds:
    """need float32 [Q, E]: how surely request q asks for effect e (EFFECTS order); sources: per request, one
    string per effect saying where its need comes from ("keywords: delete", "learned", "agreement: 2 of the top
    3", or "" when nothing raised it above 0)."""

    need: np.ndarray
    sources: tuple[tuple[str, ...], ...]

    def asked(self, q: int) -> tuple[str, ...]:
        """The effects request q asks for (need ≥ ASKED)."""
        return tuple(e for j, e in enumerate(EFFECTS) if self.need[q, j] >= ASKED)

    def row(self, q: int) -> dict:
        """{effect: {"need": float, "source": str | None}} of request q (JSON-ready)."""
        return {e: {"need": round(float(self.need[q, j]), 3), "source": self.sources[q][j] or None}
                for j, e in enumerate(EFFECTS)}

    def summary(self, q: int) -> str:
        """"the request only reads" or "the request asks to delete, send to others"."""
        asked = self.asked(q)
        return "the request asks to " + ", ".join(ASK_WORDS[e] for e in asked) if asked else "the request only reads"


def request_needs(texts, learned=None, agree=None, agreement_weight: float = 0.0) -> RequestNeeds:
    """The needed effects of requests ``texts``: per effect the highest of the keywords (KEYWORD_CONFIDENCE),
    the learned probabilities ``learned`` float [Q, E] (None: none) and ``agreement_weight`` × ``agree`` float
    [Q, E] (``agreement``; None: none) × the words' highest need, with the source of the highest."""
    hits, words = keyword_needs(texts)
    q = len(texts)
    cands = [("keywords", hits * np.float32(KEYWORD_CONFIDENCE))]
    if learned is not None:
        cands.append(("learned", np.asarray(learned, np.float32).reshape(q, len(EFFECTS))))
    if agree is not None and agreement_weight > 0:
        words_any = np.max([c for _, c in cands], axis=(0, 2))[:, None]  # [Q, 1]
        cands.append(("agreement", np.float32(agreement_weight) * np.asarray(agree, np.float32) * words_any))
    stack = np.stack([c for _, c in cands])  # [S, Q, E]
    best = stack.argmax(0)
    need = stack.max(0).astype(np.float32)
    sources = []
    for i in range(q):
        row = []
        for j, e in enumerate(EFFECTS):
            kind = cands[best[i, j]][0]
            if need[i, j] <= 0:
                row.append("")
            elif kind == "keywords":
                row.append(f"keywords: {words[i][e]}")
            elif kind == "learned":
                row.append(f"learned: {need[i, j]:.2f}")
            else:
                n = int(round(float(np.asarray(agree)[i, j]) * AGREEMENT_TOP))
                row.append(f"agreement: {n} of the top {AGREEMENT_TOP}")
        sources.append(tuple(row))
    return RequestNeeds(need, tuple(sources))


def _cover(need):
    """cover [..., E]: need (numpy, or jax inside the jitted functions), with a local write covered by the highest
    need of any effect."""
    xp = np if isinstance(need, np.ndarray) else jnp
    return xp.where(xp.arange(len(EFFECTS)) == EFFECTS.index("local_write"), need.max(-1, keepdims=True), need)


@jax.jit
def unasked(need, effects, specific):
    """float32 [Q, N]: how far tool t's effects go beyond what request q asks for, in [0, 1]; 0 for a tool
    without effects. need [Q, E], effects [N, E] (0/1), specific: the weight of a mismatch between a changing
    request's effects and the tool's (0: any change covers every effect; 1: each effect must be asked)::

        unasked = (1 − any(q)) + any(q) · specific · max over t's effects e of (1 − cover(q, e))

    with any(q) = the highest need of request q (whether it changes anything at all)."""
    cover = _cover(jnp.asarray(need, jnp.float32))
    eff = jnp.asarray(effects, jnp.float32)
    anyq = cover[:, EFFECTS.index("local_write")][:, None]
    mismatch = jnp.max(eff[None] * (1.0 - cover[:, None, :]), axis=-1)
    has = jnp.any(eff > 0, axis=-1)[None, :]
    return jnp.where(has, (1.0 - anyq) + anyq * specific * mismatch, 0.0)


@jax.jit
def exposure_weight(need, effects, strength, relief, specific):
    """float32 [Q, N]: w = 1 + strength · unasked − relief · asked (module docstring), what λ·f_risk [N] is
    multiplied by. need [Q, E]; effects [N, E] (0/1); strength, relief, specific ≥ 0 (scalars)."""
    u = unasked(need, effects, specific)
    has = jnp.any(jnp.asarray(effects) > 0, axis=-1)[None, :]
    return 1.0 + strength * u - relief * jnp.where(has, 1.0 - u, 0.0)


@jax.jit
def held_back(need, must_confirm, hold_back):
    """bool [Q, N]: the tools held back for each request — a must-confirm tool (``tool_must_confirm``, bool [N])
    when the request asks for no change: 1 − any(q) > hold_back (0: none held back). need [Q, E]. Read requests
    never see delete, send, secret, code or money tools; a request that asks for one change still sees the tools of
    another (the exposure weight pushes those down). Strictly above: at hold-back 0.5 a request is held to reading
    exactly when no need reaches ``ASKED``, as its explanation says."""
    reads = 1.0 - _cover(jnp.asarray(need, jnp.float32))[:, EFFECTS.index("local_write")]  # [Q]
    return (hold_back > 0) & (reads[:, None] > hold_back) & jnp.asarray(must_confirm, bool)[None, :]


def unasked_effects(needs: RequestNeeds, q: int, effects_row) -> tuple[str, ...]:
    """The effects of a tool (``effects_row`` bool [E]) that request q did not ask for (cover below ``ASKED``)."""
    cover = _cover(np.asarray(needs.need[q]))
    return tuple(e for j, e in enumerate(EFFECTS) if effects_row[j] and cover[j] < ASKED)


def held_back_reason(needs: RequestNeeds, q: int, effects_row) -> str:
    """Why a tool with effects ``effects_row`` bool [E] is pushed down for request q: "held back: sends to
    others; the request only reads" — its effects the request did not ask for (``unasked_effects``), then what
    the request asks."""
    missing = unasked_effects(needs, q, effects_row)
    if not missing:
        return "risk: " + needs.summary(q)
    return f"held back: {', '.join(EFFECT_WORDS[e] for e in missing)}; {needs.summary(q)}"


__all__ = ["EFFECTS", "EFFECT_WORDS", "REQUEST_KEYWORDS", "KEYWORD_CONFIDENCE", "AGREEMENT_TOP", "RequestNeeds",
           "normalise_request", "keyword_needs", "tool_effects", "tool_must_confirm", "agreement", "request_needs", "unasked",
           "exposure_weight", "held_back", "unasked_effects", "held_back_reason", "HOLD_OFFSET"]
