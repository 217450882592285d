"""A tool's name as evidence between its siblings: words, verbs, direction and objects, from the name alone.

    words = name_words("getForensicAnalysis")              # ("get", "forensic", "analysis")
    table = name_table(tool_names)                           # NameTable: what every name says, built once
    e = name_evidence(table, request_texts)                  # float32 [Q, N], signed, in [-2, 3]
    s = sibling_order(scores, e, table.objects, window, weight=w)  # [Q, N]: siblings reordered in the top `window`

Real MCP servers list families of near-identical tools: list / get / create / update / delete of one resource,
``speech_to_text`` beside ``text_to_speech``, ``list_sources`` beside ``list_bases``. An encoder reads such
siblings as nearly the same text, so the right family reaches the top 5 with the wrong sibling first. Their
names differ in exactly the words that separate them; this module reads those words against the request's,
with rules and a small English table, no model:

* **verb** (``VERB_FAMILIES``): a tool's verb is the first of its first two name words that is a verb of the
  table, else its last word when that is one (``academic_paper_search``); the request's verbs are its words of
  the table (inflections stripped, ``lemmas``) that do not follow a determiner or possessive ("the list of", "my
  settings"). Evidence: +1 when the tool's family is one of the request's, 0 when only a similar one is
  (``SIMILAR``: list / get / search read, create / update / write change, analyse / calculate compute), −1 when
  every verb of the request is of another kind; 0 when either has no verb.
* **direction**: a name ``A_to_B``, ``A2B``, ``from_A_to_B`` or ``B_from_A`` (``direction``) converts A into B.
  The request agrees (+1) when it marks B as the target ("to", "into", "as" B) or A as the source ("from" A),
  else when it names A before B; it disagrees (−1) when it marks them the other way round or names B first;
  0 when it names neither side's words.
* **object**: the share of the tool's other name words (plural stripped, ``stem``; not its verb, not
  ``NAME_STOP``) that the request contains: ``list_airtable_bases`` covers "list the airtable bases" fully,
  ``list_airtable_sources`` half. Shared words lift all siblings alike; the word that only one sibling has
  separates them.

The evidence is their sum (float32 [Q, N], in [−2, 3]). ``sibling_order`` uses it only between siblings: among
each request's top ``window`` tools, every group of tools that share an object word is put in the order of
score + weight · spread · evidence (spread: the window's top-1 minus its last score) and given back the group's
own scores in that order. A tool trades places only with a sibling: no tool outside the window moves, the
window keeps its set, and a tool without a sibling there keeps its place (a matching verb never lifts
``get_file_info`` over ``git_log``).

Why names: an MCP tool's name is written by its server's author to tell it from its siblings, and the words
that do so (the verb, the direction, the one differing noun) are exactly what a sentence embedding blurs.
What it cannot do: synonyms the table does not list, names in other languages, verbs the request only implies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from scipy import sparse

# verb family -> the English verbs (base forms) that name it, in a request or a tool name
VERB_FAMILIES: dict[str, tuple[str, ...]] = {
    "list": ("list", "enumerate", "browse"),
    "get": ("get", "read", "fetch", "show", "retrieve", "view", "display", "describe", "check", "inspect",
            "obtain", "query", "see", "extract"),
    "search": ("search", "find", "lookup", "look", "locate", "seek", "discover"),
    "create": ("create", "add", "new", "make", "generate", "insert", "build", "register", "compose", "draft",
               "init", "initialize"),
    "update": ("update", "edit", "set", "modify", "change", "rename", "patch", "replace", "adjust", "configure",
               "upsert"),
    "write": ("write", "save", "store", "append"),
    "delete": ("delete", "remove", "erase", "drop", "destroy", "purge", "clear", "uninstall", "unregister",
               "revoke"),
    "send": ("send", "post", "publish", "email", "notify", "share", "reply", "forward", "tweet"),
    "convert": ("convert", "transform", "translate", "transcribe", "render"),
    "start": ("start", "run", "launch", "execute", "begin", "enable", "play", "trigger", "invoke", "activate"),
    "stop": ("stop", "halt", "kill", "terminate", "disable", "pause", "cancel", "close", "deactivate", "shutdown"),
    "download": ("download", "import"),
    "upload": ("upload", "export"),
    "analyze": ("analyze", "analyse", "assess", "evaluate", "compare"),
    "calculate": ("calculate", "compute", "count", "estimate", "predict"),
}
FAMILIES = tuple(VERB_FAMILIES)
# families of one kind: a request's verb of a similar family is no evidence either way (0, not −1)
SIMILAR = (frozenset({"list", "get", "search"}), frozenset({"create", "update", "write"}),
           frozenset({"analyze", "calculate"}))
_VERB = {v: f for f, verbs in VERB_FAMILIES.items() for v in verbs}
# words that look like an inflected verb of the table but are not one
NOT_VERBS = frozenset({"news", "settings", "setting", "listings", "series", "status", "address", "process",
                       "checks", "chess"})
# a request word after one of these is a noun ("the list of", "my settings", "a new" counts: "new" is no verb)
DETERMINERS = frozenset("a an the this that these those my your our their its his her each every some any".split())
# name words that carry no object: connectors, articles, digits other than a direction's "2"
NAME_STOP = frozenset("to from by of the a an and or for in on with into as at 2 4 all".split())
TARGET_MARKERS = ("to", "into", "as")
SOURCE_MARKERS = ("from",)
_NAME_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
_WORD = re.compile(r"[a-z0-9]+")


def name_words(name: str) -> tuple[str, ...]:
    """Lower-case words of a tool name: snake, kebab, dots, slashes, spaces, camelCase, and digits split off
    ("getForensicAnalysis" -> get forensic analysis; "pdf2text" -> pdf 2 text; "HTTPRequest" -> http request)."""
    out = []
    for part in _NAME_SPLIT.split(name):
        out.extend(w.lower() for w in _CAMEL.split(part) if w)
    return tuple(out)


def stem(word: str) -> str:
    """``word`` without a plural ending ("sources" -> "source", "entries" -> "entry", "addresses" -> "address"):
    how a name word and a request word are compared."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def lemmas(word: str) -> tuple[str, ...]:
    """Candidate base forms of an inflected verb ("listing" -> list, listin, …; "created" -> creat, create)."""
    out = [word]
    if word.endswith("ies") or word.endswith("ied"):
        out.append(word[:-3] + "y")
    if word.endswith("es"):
        out.append(word[:-2])
    if word.endswith("s"):
        out.append(word[:-1])
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            base = word[:-len(suffix)]
            out += [base, base + "e"]
            if len(base) > 2 and base[-1] == base[-2]:
                out.append(base[:-1])
    return tuple(out)


def verb_family(word: str) -> str | None:
    """The ``VERB_FAMILIES`` family of a word, inflections stripped (``lemmas``), or None."""
    if word in NOT_VERBS:
        return None
    return next((_VERB[w] for w in lemmas(word) if w in _VERB), None)


def tool_verb(words) -> tuple[str | None, int]:
    """(family, position) of a tool's verb: the first of its first two name words that is a verb, else its
    last word when that is one; (None, -1) for a name without one ("text_to_speech")."""
    words = tuple(words)
    for i, w in enumerate(words[:2]):
        if verb_family(w) is not None:
            return verb_family(w), i
    if words and verb_family(words[-1]) is not None:
        return verb_family(words[-1]), len(words) - 1
    return None, -1


def request_words(text: str) -> tuple[str, ...]:
    """Lower-case words of a request, identifiers split ("runShellCommand" -> run shell command)."""
    return tuple(_WORD.findall(" ".join(name_words(text))))


def request_verbs(words) -> frozenset[str]:
    """The verb families of a request's words (``request_words``): every word of the table that does not follow
    a determiner or possessive ("show the list of bases" -> {get}; "list my settings" -> {list})."""
    out = set()
    for i, w in enumerate(words):
        fam = verb_family(w)
        if fam is not None and (i == 0 or words[i - 1] not in DETERMINERS or w == "new"):
            out.add(fam)
    return frozenset(out)


def verb_evidence(tool_family: str | None, request_families) -> float:
    """+1: the tool's verb family is one the request asks for; 0: only a similar one (``SIMILAR``), or either
    has no verb; −1: every verb of the request is of another kind."""
    if tool_family is None or not request_families:
        return 0.0
    if tool_family in request_families:
        return 1.0
    similar = any(tool_family in group and not group.isdisjoint(request_families) for group in SIMILAR)
    return 0.0 if similar else -1.0


def direction(words) -> tuple[frozenset, frozenset] | None:
    """(source stems, target stems) of a name that converts one thing into another: ``A_to_B``, ``A2B``,
    ``A_into_B``, ``from_A_to_B`` (the verb and a leading "from" dropped), ``B_from_A``; None otherwise."""
    words = list(words)
    _, v = tool_verb(words)
    inner = range(1, len(words) - 1)
    to = next((i for i in inner if words[i] in ("to", "2", "into")), None)
    frm = next((i for i in inner if words[i] == "from"), None)
    if to is not None:  # A_to_B, from_A_to_B
        src = [x for j, x in enumerate(words[:to]) if j != v and x != "from"]
        dst = [x for j, x in enumerate(words[to + 1:], to + 1) if j != v]
    elif frm is not None:  # B_from_A
        dst = [x for j, x in enumerate(words[:frm]) if j != v]
        src = [x for j, x in enumerate(words[frm + 1:], frm + 1) if j != v]
    else:
        return None
    src = frozenset(stem(x) for x in src if x not in NAME_STOP)
    dst = frozenset(stem(x) for x in dst if x not in NAME_STOP)
    return (src, dst) if src and dst and not (src & dst) else None


def direction_evidence(words, source, target) -> float:
    """+1 when the request's words (stemmed, ``request_words``) read as source -> target, −1 as target ->
    source, 0 when they do not say: a marker ("to", "into", "as" before the target within two words, "from"
    before the source) decides; without one, the order in which the request first names each side."""
    stems = [stem(w) for w in words]

    def marked(markers, side):
        return any(stems[j] in side and any(stems[m] in markers for m in range(max(0, j - 2), j))
                   for j in range(len(stems)))

    vote = (marked(TARGET_MARKERS, target) - marked(TARGET_MARKERS, source)
            + marked(SOURCE_MARKERS, source) - marked(SOURCE_MARKERS, target))
    if vote:
        return float(np.sign(vote))
    first_src = next((j for j, s in enumerate(stems) if s in source), None)
    first_dst = next((j for j, s in enumerate(stems) if s in target), None)
    if first_src is None or first_dst is None:
        return 0.0
    return 1.0 if first_src < first_dst else -1.0


def object_words(words) -> tuple[str, ...]:
    """A name's object words: its words, stemmed, but its verb and ``NAME_STOP``."""
    _, v = tool_verb(words)
    return tuple(dict.fromkeys(stem(w) for i, w in enumerate(words) if i != v and w not in NAME_STOP))


def siblings(name_a: str, name_b: str) -> bool:
    """Whether two tool names share an object word (``object_words``): list_bases and get_base do, get_weather
    and send_email do not. (A sibling in the evaluation is also of the same server, where servers are known.)"""
    return bool(set(object_words(name_words(name_a))) & set(object_words(name_words(name_b))))


@dataclass(frozen=True)
class NameTable:
    """What N tool names say, built once per registry (``name_table``).

    verb: int32 [N] the index in ``FAMILIES`` of each tool's verb (-1: none); objects: scipy CSR float32 [N, V]
    each tool's object words (``object_words``) over ``vocab`` {stem: column}; n_objects: float32 [N] how many
    each has; directions: ((tool, source stems, target stems), ...) of the names that convert."""

    verb: np.ndarray
    objects: sparse.csr_matrix
    n_objects: np.ndarray
    vocab: dict
    directions: tuple

    @property
    def size(self) -> int:
        return int(self.verb.shape[0])


def name_table(names) -> NameTable:
    """The ``NameTable`` of tool names (any iterable of N strings)."""
    words = [name_words(str(n)) for n in names]
    verb = np.asarray([-1 if f is None else FAMILIES.index(f) for f, _ in map(tool_verb, words)], np.int32)
    objs = [object_words(w) for w in words]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(w for o in objs for w in o))}
    rows = np.repeat(np.arange(len(objs)), [len(o) for o in objs])
    cols = np.asarray([vocab[w] for o in objs for w in o], np.int64)
    objects = sparse.csr_matrix((np.ones(cols.size, np.float32), (rows, cols)),
                                shape=(len(objs), max(1, len(vocab))))
    dirs = tuple((i, *d) for i, d in enumerate(map(direction, words)) if d is not None)
    return NameTable(verb, objects, np.asarray([len(o) for o in objs], np.float32), vocab, dirs)


# the verb evidence of a tool family (row) against one request family (column): 1 same, 0 similar, -1 else
_SIM = np.asarray([[verb_evidence(a, {b}) for b in FAMILIES] for a in FAMILIES], np.float32)


def name_evidence(table: NameTable, texts, tools=None) -> np.ndarray:
    """float32 [Q, N]: verb + direction + object evidence (module docstring) of each request text against each
    tool of ``table`` (or [Q, T] against the tools ``tools`` int [T] only); in [−2, 3]. Host work:
    O(Q · (request words + N)) with sparse object words (N → T with ``tools``)."""
    texts = list(texts)
    words = [request_words(t) for t in texts]
    n_q = len(texts)
    if tools is not None:
        tools = np.asarray(tools, np.int64)
        where = {int(t): j for j, t in enumerate(tools)}
        table = NameTable(table.verb[tools], table.objects[tools], table.n_objects[tools], table.vocab,
                          tuple((where[t], src, dst) for t, src, dst in table.directions if t in where))
    # object: the share of each tool's object words the request contains
    present = sparse.lil_matrix((n_q, table.objects.shape[1]), dtype=np.float32)
    for q, ws in enumerate(words):
        cols = sorted({table.vocab[s] for s in map(stem, ws) if s in table.vocab})
        if cols:
            present[q, cols] = 1.0
    matched = np.asarray((present.tocsr() @ table.objects.T).todense(), np.float32)
    out = matched / np.maximum(table.n_objects, 1.0)
    # verb: the best agreement of the tool's family with any of the request's families
    fams = np.zeros((n_q, len(FAMILIES)), bool)
    for q, ws in enumerate(words):
        fams[q, [FAMILIES.index(f) for f in request_verbs(ws)]] = True
    best = np.where(fams[:, None, :], _SIM[None], -np.inf).max(-1)  # [Q, F]
    best = np.where(fams.any(-1, keepdims=True), best, 0.0)
    has = table.verb >= 0
    out[:, has] += best[:, table.verb[has]]
    # direction: the few names that convert, one by one
    for t, src, dst in table.directions:
        out[:, t] += [direction_evidence(ws, src, dst) for ws in words]
    return out.astype(np.float32)


def _groups(link: np.ndarray) -> list[np.ndarray]:
    """The connected groups (two or more members) of a small symmetric bool adjacency [w, w]."""
    seen, out = np.zeros(link.shape[0], bool), []
    for start in range(link.shape[0]):
        if seen[start]:
            continue
        members, todo = [], [start]
        seen[start] = True
        while todo:
            i = todo.pop()
            members.append(i)
            for j in np.flatnonzero(link[i] & ~seen):
                seen[j] = True
                todo.append(j)
        if len(members) > 1:
            out.append(np.sort(np.asarray(members)))
    return out


def top_window(row, window: int) -> np.ndarray:
    """int64 [window]: the columns of the ``window`` highest of ``row`` float [M], best first, ties to the lower
    column (the ranking's order), without sorting all M."""
    row = np.asarray(row)
    window = min(int(window), row.size)
    edge = np.partition(row, row.size - window)[row.size - window]  # the window-th highest value
    cand = np.flatnonzero(row >= edge)
    return cand[np.lexsort((cand, -row[cand]))][:window]


def sibling_order(scores, evidence, objects: sparse.csr_matrix, window: int, cand=None, *,
                  weight: float, tops=None) -> np.ndarray:
    """float32 [B, M]: ``scores`` with, among each request's top ``window``, every group of siblings (tools linked,
    directly or through each other, by a shared object word) given back its own scores in the order of score +
    weight · spread · evidence (spread: the window's top-1 minus its last score; ties: the lower column). A tool
    only ever trades places with a sibling: the window's set, the scores it holds and the place of every tool
    without a sibling there are as they were, so ``list_X_bases`` and ``list_X_sources`` are told apart without
    lifting ``get_file_info`` over ``git_log``.

    Args: scores float32 [B, M] (M = N, or the candidates' C); evidence float32 [B, M] (``name_evidence`` at the
    same columns); objects: the ``NameTable``'s [N, V]; window ≥ 1; cand int [B, M]: each column's tool (None: the
    column is the tool); weight ≥ 0 (0: nothing moves); tops: each row's ``top_window`` when the caller has them
    already (None: found here). Host work: a [w, V] × [V, w] sparse product per request.
    """
    out = np.array(scores, np.float32, copy=True)
    evidence = np.asarray(evidence, np.float32)
    for b in range(out.shape[0]):
        row = out[b]
        top = top_window(row, window) if tops is None else tops[b]
        tools = top if cand is None else np.asarray(cand[b])[top]
        block = objects[tools]
        spread = float(row[top[0]] - row[top[-1]])
        for members in _groups((block @ block.T).toarray() > 0):
            cols = top[members]
            values = np.sort(row[cols])[::-1]
            moved = row[cols] + weight * spread * evidence[b, cols]
            order = np.lexsort((cols, -moved))  # by moved score, descending; ties: the lower column
            row[cols[order]] = values
    return out


__all__ = ["VERB_FAMILIES", "FAMILIES", "SIMILAR", "NameTable", "name_words", "stem", "lemmas", "verb_family",
           "tool_verb", "request_words", "request_verbs", "verb_evidence", "direction", "direction_evidence",
           "object_words", "siblings", "name_table", "name_evidence", "top_window", "sibling_order"]
