"""Risk level (1..5) of every tool of a user registry, with where it came from.

The rule (chosen on the demo labels and the UltraTool / Seal-Tools audited labels, then raised so that a gateway
at `allow_level` 3 confirms the actions below; docs/registry.md):

1. a tool's own `risk` (1..5) is final: source "declared";
2. otherwise the learned risk head gives the base level, nearest to 1 + 4·f_risk: source "learned"
   (without a head, the base is 1 and only the next two steps count);
3. keywords (word boundaries) may raise it to a floor: the paper's permission categories to
   `RiskPolicy.keyword_floors` (shell 3, write 3, secret 3, code 2, network 1), and the risk keyword groups of
   `RISK_KEYWORDS` — actions that must not pass a gateway unconfirmed — to `RiskPolicy.risk_floors`: running
   shell commands or code ("exec"), moving money ("money"), credentials ("credential") and destructive
   deletion ("delete") 4, sending messages on the user's behalf ("message") 3; source "keywords:shell+write",
   "keywords:money";
4. MCP annotations are hints from a possibly untrusted server: an explicit `destructiveHint: true` on a tool
   that is not `readOnlyHint: true` raises it to `destructive_floor` (4): source "mcp:destructiveHint". They
   never lower it, unless `trust_annotations` is set (or the tool's source is in `trusted_sources`): then an
   explicit `readOnlyHint: true` caps the level at `read_only_cap` (2), at `read_only_secret_cap` (4) when the
   text matches the secret category or the credential group — reading credentials stays above the gateway's
   default: source "mcp:readOnlyHint".

The sources of a tool are every step whose level equals the final one (a tuple when several agree).

Why this order: a declaration beats a guess, and an untrusted server may raise a risk level, never lower it.
Why the groups are not permission categories: the five categories and their substring rule feed the paper's
reproduction (ToolGraph permission edges, rule filter) and keep their shape [N, 5]; the groups only raise levels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from riskrank_jax.permissions import CATEGORY_NAMES, split_identifier
from riskrank_jax.model.risk_head import levels_from_scores
from riskrank_jax.registry.permissions import keyword_pattern, permission_mask_words
from riskrank_jax.registry.registry import Registry

DEFAULT_KEYWORD_FLOORS = {"shell": 3, "write": 3, "secret": 3, "code": 2, "network": 1}

# Risk keyword groups: what a tool does that a gateway must confirm. One rule per string; every word matches on
# word boundaries (camelCase / snake_case split first, as permission_mask_words):
#   "shell command|bash"      a phrase anywhere, with inflections (keyword_pattern: "scripts", "wiped")
#   "=delete|wipe"            a verb anywhere, base, -s or -ing form: "deletes", "deleting", not "deleted"
#                             ("check the file was deleted", "restore deleted files" do not delete)
#   "run|execute ... code"    a verb (base or -s form: "runs", not "running" / "executed"), then within
#                             RULE_GAP words of the same clause an object (with inflections: "scripts")
#   "^pay|refund"             a verb (base or -s form) opening a clause of the name or description, not of the
#                             parameters; after "and", "or", "then", "to", "also", "will", "can", "may" the
#                             base form only: "Refund a charge", "... and pay out the balance", but not
#                             "List charges and refunds" (nouns that read like verbs)
# A phrase or verb right after "without", "not", "never", "no", "cannot" or "...n't" does not count.
RISK_KEYWORDS: dict[str, tuple[str, ...]] = {
    "exec": (
        ("shell|bash|zsh|powershell|subprocess|sudo|eval|exec|interpreter|repl|code execution|arbitrary code|"
         "remote code"),
        ("run|execute|exec|eval|evaluate|spawn|invoke|launch|interpret ... command|script|code|program|binary|"
         "executable|python|javascript|typescript|ruby|perl|php|lua|sql|snippet|notebook|macro|playbook|unit test|"
         "test suite|container"),
    ),
    "money": (
        ("send money|send funds|send payment|transfer money|transfer funds|move money|move funds|wire money|"
         "wire funds|wire transfer|bank transfer|money transfer|buy or sell"),
        ("send|transfer|wire|move|withdraw|deposit ... money|funds|cash|usd|eur|gbp|dollar|euro|bitcoin|crypto|"
         "cryptocurrency"),
        ("make|process|submit|initiate|issue|create|execute|authorize|capture|schedule|approve|send ... payment|"
         "refund|transfer|charge|payout|wire|remittance|purchase"),
        "place ... order",
        "check out|checkout ... cart|basket|order",
        "^pay|refund|charge|purchase|buy|sell|withdraw|wire|donate",
    ),
    "credential": (
        ("password|passphrase|passcode|passwd|token|api key|access key|secret|private key|ssh key|signing key|"
         "encryption key|credential|keychain|keystore|keyring|otp|one time code|verification code|recovery code|"
         "backup code|session cookie"),
    ),
    "delete": (
        "=delete|wipe|erase|destroy|purge|shred|obliterate",
        "tear down|teardown|force push|reset hard|hard reset|factory reset|empty trash",
        ("remove ... file|folder|directory|repo|repository|database|table|record|row|branch|bucket|volume|disk|"
         "partition|cluster|backup|snapshot|everything|account|commit|project|document|container"),
        "drop ... table|database|db|schema|collection|index|keyspace|column|partition|bucket",
        "truncate ... table|file|log|database|collection|partition",
        "clear ... calendar|database|table|history|mailbox|inbox|disk|drive|bucket",
        "discard ... change|edit|work|commit",
        "format ... disk|drive|partition|volume|card",
        "overwrite ... history|database|disk|partition|backup|remote",
        "^empty",
    ),
    "message": (
        ("send|forward ... email|e-mail|mail|message|sms|dm|invite|invitation|newsletter|reply|fax|letter|"
         "notification|announcement|tweet|post|file|document|attachment|link"),
        ("post|publish|tweet|broadcast|schedule ... message|comment|reply|tweet|status|post|article|story|"
         "announcement|review|photo|video|email|e-mail|newsletter"),
        "on ... behalf",
        "^post|publish|tweet|reply|share|forward|broadcast",
    ),
}
DEFAULT_RISK_FLOORS = {"exec": 4, "money": 4, "credential": 4, "delete": 4, "message": 3}
RULE_GAP = 3  # words allowed between a verb and its object ("Send a private direct message")

# one line per clause (clause_lines): a pattern's spaces are " +", so no match spans two clauses
_NEGATED = r"\b(?<!\bwithout )(?<!\bnot )(?<!\bnever )(?<!\bno )(?<!\bcannot )(?<!n't )"
_OPENERS = r"\b(?:and|or|then|to|also|will|can|may) +"
_CLAUSES = re.compile(r"[.;:!?](?=\s|$)|[()\[\]{}]")
_SPACES = re.compile(r" {2,}")


@dataclass(frozen=True)
class RiskPolicy:
    """How keywords and annotations move the level. Defaults: see the module docstring."""

    keyword_floors: dict = field(default_factory=lambda: dict(DEFAULT_KEYWORD_FLOORS))
    risk_floors: dict = field(default_factory=lambda: dict(DEFAULT_RISK_FLOORS))
    destructive_floor: int = 4
    trust_annotations: bool = False
    trusted_sources: tuple[str, ...] = ()  # sources (MCP servers) whose annotations are trusted
    read_only_cap: int = 2
    read_only_secret_cap: int = 4


@dataclass(frozen=True, eq=False)
class RiskAssessment:
    """levels: int32 [N] in 1..5; sources: per tool, the steps that set the level; categories: per tool,
    the matched permission categories; learned: f_risk [N] (NaN without a head); scores: float32 [N] in
    [0, 1], the same rule on the continuous scale (r − 1)/4 (f_risk raised to the floors, capped by the
    cap; a declared r gives (r − 1)/4) — finer than the levels, for ranking; groups: per tool, the matched
    risk keyword groups (RISK_KEYWORDS); dimensions: the dimension assessment the levels follow from
    (`registry.dimensions.assessment_to_risk`), None for this module's rule."""

    levels: np.ndarray
    sources: tuple[tuple[str, ...], ...]
    categories: tuple[tuple[str, ...], ...]
    learned: np.ndarray
    scores: np.ndarray
    groups: tuple[tuple[str, ...], ...] = ()
    dimensions: object = None  # registry.dimensions.DimensionAssessment when the levels come from dimensions

    def source_text(self, i: int) -> str:
        return ",".join(self.sources[i])


def keyword_floor(mask: np.ndarray, floors: dict, names: tuple[str, ...] = CATEGORY_NAMES) -> np.ndarray:
    """int32 [N]: the highest floor among the matched columns of bool mask [N, len(names)] (1 when none match);
    by default the five permission categories."""
    per_col = np.array([floors.get(c, 1) for c in names], np.int32)
    return np.where(mask, per_col[None, :], 1).max(axis=1, initial=1).astype(np.int32)


# ------------------------------------------------------------------------------------------ risk keyword groups


def _verb_forms(word: str, base_only: bool = False, ing: bool = False) -> str:
    """Regex of a verb's base form, or of its base and -s forms ("pay|pays", "push|pushes"), with `ing` also
    its -ing form ("deleting")."""
    w = re.escape(word)
    if base_only:
        return w
    if word.endswith("e"):
        return w[:-1] + ("(?:e|es|ing)" if ing else "(?:e|es)")
    s = "es" if re.search(r"(?:s|sh|ch|x|z)$", word) else "s"
    return w + (f"(?:{s}|ing)?" if ing else f"(?:{s})?")


def _verbs(alternatives: str, base_only: bool = False, ing: bool = False) -> str:
    """Regex of "a|b c": each alternative's first word as a verb form, later words with keyword_pattern."""
    out = []
    for alt in alternatives.split("|"):
        first, *rest = alt.split()
        out.append(r"\b" + _verb_forms(first, base_only, ing)
                   + "".join(r"[\s_-]+" + keyword_pattern(w)[2:-2] for w in rest) + r"\b")
    return "(?:" + "|".join(out) + ")"


def rule_pattern(rule: str) -> tuple[str, bool]:
    """(regex, opens_clause) of one RISK_KEYWORDS rule (syntax above the table); opens_clause: match it only
    in the clauses of the name and description."""
    if rule.startswith("^"):
        return (r"(?:^ *(?:\w+ly +)?" + _verbs(rule[1:]) + "|" + _OPENERS + r"(?:\w+ly +)?"
                + _verbs(rule[1:], base_only=True) + ")"), True
    if rule.startswith("="):
        return _NEGATED + _verbs(rule[1:], ing=True), False
    if " ... " in rule:
        verbs, objects = rule.split(" ... ")
        objs = "(?:" + "|".join(keyword_pattern(o) for o in objects.split("|")) + ")"
        return _NEGATED + _verbs(verbs) + r"(?: +\S+){0," + str(RULE_GAP) + r"}? +" + objs, False
    return _NEGATED + "(?:" + "|".join(keyword_pattern(k) for k in rule.split("|")) + ")", False


@lru_cache(maxsize=4)
def group_regexes(table: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[tuple[re.Pattern | None, ...], ...]:
    """Per group: (regex of the rules that match anywhere, regex of the clause-opening rules), None if none."""
    out = []
    for _, rules in table:
        parts = [(p.replace(r"[\s_-]+", "[ _-]+"), opens) for p, opens in map(rule_pattern, rules)]
        anywhere = [p for p, opens in parts if not opens]
        opening = [p for p, opens in parts if opens]
        out.append(tuple(re.compile("|".join(ps), re.M) if ps else None for ps in (anywhere, opening)))
    return tuple(out)


def clause_lines(text: str) -> tuple[str, str]:
    """(every clause, the clauses of the name and description), one line each, in lower-cased words separated
    by single spaces (as split_identifier makes them); tool_text puts the parameters after " Parameters: "."""
    def lines(part: str) -> str:  # split_identifier keeps the "\n" between clauses
        return _SPACES.sub(" ", split_identifier("\n".join(" ".join(c.split()) for c in _CLAUSES.split(part))))

    head = text.split(" Parameters: ", 1)[0]
    every = lines(text)
    return every, (every if head == text else lines(head))


def risk_keyword_mask(texts, table: dict[str, tuple[str, ...]] | None = None) -> np.ndarray:
    """bool [N, G]: risk keyword group g (in `table` order, default RISK_KEYWORDS) matches text i."""
    table = RISK_KEYWORDS if table is None else table
    regexes = group_regexes(tuple((g, tuple(r)) for g, r in table.items()))
    out = np.zeros((len(texts), len(regexes)), dtype=bool)
    for i, t in enumerate(texts):
        every, opening = clause_lines(t)
        for g, (anywhere, opens) in enumerate(regexes):
            out[i, g] = bool((anywhere is not None and anywhere.search(every))
                             or (opens is not None and opens.search(opening)))
    return out


def matched_groups(text: str) -> tuple[str, ...]:
    """Names of the RISK_KEYWORDS groups that match one text, in table order."""
    return tuple(g for g, hit in zip(RISK_KEYWORDS, risk_keyword_mask([text])[0]) if hit)


# ------------------------------------------------------------------------------------------------ assessment


def _annotation_bounds(registry: Registry, secret: np.ndarray, policy: RiskPolicy) -> tuple[np.ndarray, np.ndarray]:
    """(floor [N], cap [N]) from MCP annotations; cap 5 means no cap. secret: bool [N], the text touches
    credentials (secret category or credential group)."""
    n = registry.size
    floor, cap = np.ones(n, np.int32), np.full(n, 5, np.int32)
    for i, a in enumerate(registry.annotations):
        if a is None:
            continue
        read_only = a.declared_true("readOnlyHint")
        if a.declared_true("destructiveHint") and not read_only:
            floor[i] = policy.destructive_floor
        trusted = policy.trust_annotations or registry.tools[i].source in policy.trusted_sources
        if read_only and trusted:
            cap[i] = policy.read_only_secret_cap if secret[i] else policy.read_only_cap
    return floor, cap


def assess_risk(registry: Registry, scores=None, policy: RiskPolicy = RiskPolicy()) -> RiskAssessment:
    """Risk of every tool.

    Args:
      registry: the tools.
      scores: f_risk [N] in (0, 1) from a risk head over the registry's text embeddings, or None.
      policy: keyword floors and the treatment of annotations.
    """
    n = registry.size
    mask = permission_mask_words(registry.texts)
    gmask = risk_keyword_mask(registry.texts)
    group_names = tuple(RISK_KEYWORDS)
    learned = np.full(n, np.nan, np.float32) if scores is None else np.asarray(scores, np.float32)
    base = np.ones(n, np.int32) if scores is None else levels_from_scores(learned)
    kw = np.maximum(keyword_floor(mask, policy.keyword_floors),
                    keyword_floor(gmask, policy.risk_floors, group_names))
    secret = mask[:, CATEGORY_NAMES.index("secret")] | gmask[:, group_names.index("credential")]
    ann_floor, ann_cap = _annotation_bounds(registry, secret, policy)
    floor = np.maximum(kw, ann_floor)
    levels = np.minimum(np.maximum(base, floor), ann_cap)
    cont = np.nan_to_num(learned, nan=0.0)
    cont = np.minimum(np.maximum(cont, (floor - 1) / 4.0), (ann_cap - 1) / 4.0)
    declared = np.array([0 if r is None else r for r in registry.declared_risk], np.int32)
    levels = np.where(declared > 0, declared, levels).astype(np.int32)
    cont = np.where(declared > 0, (declared - 1) / 4.0, cont).astype(np.float32)
    cats = tuple(tuple(c for c, hit in zip(CATEGORY_NAMES, row) if hit) for row in mask)
    groups = tuple(tuple(g for g, hit in zip(group_names, row) if hit) for row in gmask)
    sources = tuple(("declared",) if declared[i] else
                    _sources_of(int(levels[i]), int(base[i]), int(max(base[i], floor[i])), int(ann_floor[i]),
                                tuple(c for c in cats[i] if policy.keyword_floors.get(c, 1) == levels[i] > 1)
                                + tuple(g for g in groups[i] if policy.risk_floors.get(g, 1) == levels[i] > 1),
                                scores is not None)
                    for i in range(n))
    return RiskAssessment(levels, sources, cats, learned, cont, groups)


def _sources_of(level: int, base: int, raised: int, ann: int, raising_cats, has_head: bool) -> tuple[str, ...]:
    """The steps whose level equals the final one (see the module docstring)."""
    if level < raised:
        return ("mcp:readOnlyHint",)
    out = []
    if has_head and base == level:
        out.append("learned")
    if raising_cats:
        out.append("keywords:" + "+".join(raising_cats))
    if ann == level > 1:
        out.append("mcp:destructiveHint")
    return tuple(out) or (("learned",) if has_head else ("default",))
