"""Requests that need several tools: split a request into its steps without an LLM, score each step, fuse.

    steps = request_steps("Analyze Apple's stock and summarize it in a PPT in /root/ppt/apple.pptx")
    # ("Analyze Apple's stock", "summarize it in a PPT in file powerpoint presentation",
    #  "write file powerpoint presentation")
    texts, index = pack_steps(queries, max_steps=6)      # flat step texts, int32 [Q, S] into them (-1 pad)
    fused = fuse_steps(whole, step_scores, index, 0.3)   # [Q, N]: whole + 0.3·std·max over steps of z(step)

The split is rule-based: sentences, enumerations ("1. …", "- …"), then clauses at commas and conjunctions
("and", "then", "also", "as well as", "after that", "finally"); a fragment of fewer than two content words joins
the step before it. A file path becomes words ("/root/ppt/apple.pptx" -> "file powerpoint presentation") and a
step of its own ("write file …" when its clause asks to save, write, create or export, else "read file …"),
because a request that names a file needs a tool that writes or reads it. A request of one step has no steps:
its ranking is the whole request's.

Fusion: the whole request's scores plus ``weight`` times, per tool, the best of its steps' z-scores, scaled by
the whole request's per-query standard deviation so the result keeps the scale of the scores it starts from
(the risk penalty λ is measured in it). A tool that one step needs rises although the whole sentence is about
another step, so the list covers the steps instead of ten variants of the request's main step.

Why rules and not a model: they run on every request with no LLM and no training data, and every step they
produce can be shown (``riskrank-jax rank --explain``).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax.retrieve.hybrid import zscore

MAX_STEPS = 6
_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9\"'(])|\n+")
_ENUMERATION = re.compile(r"(?:^|\s)(?:\d+[.)]|\(\d+\)|[-*•])\s+")
_CLAUSE = re.compile(r",\s*(?:and\s+|then\s+|also\s+|as well as\s+)?"
                     r"|\s+(?:and then|then|and also|as well as|after that|afterwards|finally|and)\s+", re.I)
_LEADING = re.compile(r"^(?:and then|and|then|also|finally)\s+", re.I)
_STOP = frozenset("a an the and or of to in on for with me my it its this that please help i you can could would "
                  "also then".split())
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w\-]+/)*[\w\-]+(?:\.[A-Za-z0-9]+)?/?")
_WRITES = re.compile(r"\b(save|saving|write|writing|store|export|output|put|generate|create|make|produce|draft|"
                     r"record|download|convert)\w*", re.I)
# file extension -> the words a tool description uses for such a file
FILE_KINDS = {"md": "markdown", "pdf": "pdf", "docx": "word document", "doc": "word document",
              "pptx": "powerpoint presentation", "ppt": "powerpoint presentation", "xlsx": "excel spreadsheet",
              "xls": "excel spreadsheet", "csv": "csv", "py": "python script", "js": "javascript", "wav": "audio",
              "mp3": "audio", "png": "image", "jpg": "image", "jpeg": "image", "svg": "image", "txt": "text",
              "json": "json", "html": "html"}


def content_words(text: str) -> list[str]:
    """Lower-case words of ``text`` without the few function words a step is not made of."""
    return [w for w in re.findall(r"[A-Za-z0-9\u4e00-\u9fff]+", text.lower()) if w not in _STOP]


def path_words(path: str) -> str:
    """"file <kind>" for a path with an extension ("file markdown"), "directory" for one without."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if "." not in name:
        return "directory"
    ext = name.rsplit(".", 1)[1].lower()
    return f"file {FILE_KINDS.get(ext, ext)}"


def normalise_paths(text: str) -> str:
    """``text`` with every file path replaced by ``path_words`` (a path's letters are noise to an encoder)."""
    return " ".join(_PATH.sub(lambda m: f" {path_words(m.group(0))} ", text).split())


def split_steps(text: str, max_steps: int = MAX_STEPS) -> tuple[str, ...]:
    """The clauses of a request, in order (at most ``max_steps``); see the module docstring for the rules."""
    parts = []
    for sentence in _SENTENCE.split(text):
        for item in _ENUMERATION.split(sentence):
            parts.extend(_LEADING.sub("", c.strip(" ,.;:")) for c in _CLAUSE.split(item))
    steps: list[str] = []
    for p in (p for p in parts if p):
        if steps and len(content_words(p)) < 2:
            steps[-1] = f"{steps[-1]} {p}"
        else:
            steps.append(p)
    if len(steps) > 1 and len(content_words(steps[0])) < 2:
        steps = [f"{steps[0]} {steps[1]}", *steps[2:]]
    return tuple(steps[:max_steps])


def request_steps(text: str, max_steps: int = MAX_STEPS) -> tuple[str, ...]:
    """The steps of a request with their paths as words, then one "write file …" / "read file …" step per path;
    () when the request is one step (it is then ranked as a whole only)."""
    clauses = split_steps(text, max_steps)
    files = []
    for c in clauses:
        verb = "write" if _WRITES.search(c) else "read"
        files.extend(f"{verb} {path_words(m.group(0))}" for m in _PATH.finditer(c))
    steps = tuple(dict.fromkeys([normalise_paths(c) for c in clauses] + files))[:max_steps]
    return steps if len(steps) > 1 else ()


def pack_steps(queries, max_steps: int = MAX_STEPS) -> tuple[list[str], np.ndarray]:
    """(the steps of every query, flat, in order; int32 [Q, S] index of each query's steps into them, -1 padded,
    S = the most steps of a query, at least 1)."""
    flat: list[str] = []
    rows = []
    for q in queries:
        steps = request_steps(q, max_steps)
        rows.append(list(range(len(flat), len(flat) + len(steps))))
        flat.extend(steps)
    index = np.full((len(rows), max(1, max(map(len, rows), default=1))), -1, np.int32)
    for i, r in enumerate(rows):
        index[i, :len(r)] = r
    return flat, index


@jax.jit
def fuse_steps(whole, step_scores, index, weight):
    """whole + weight · std_N(whole) · max_s z(step_s), per tool; a query without steps keeps ``whole``.

    Args:
      whole: float32 [Q, N] scores of the whole requests.
      step_scores: float32 [F, N] scores of the flat steps (F >= 1; a dummy row when there are none).
      index: int32 [Q, S] each query's rows of ``step_scores``, -1 padded.
      weight: scalar.

    Returns:
      float32 [Q, N].
    """
    whole = jnp.asarray(whole, jnp.float32)
    z = zscore(step_scores)[jnp.maximum(index, 0)]  # [Q, S, N]
    best = jnp.max(jnp.where((index >= 0)[..., None], z, -jnp.inf), axis=1)  # [Q, N]
    has = (index >= 0).any(-1, keepdims=True)
    return jnp.where(has, whole + weight * whole.std(-1, keepdims=True) * jnp.where(has, best, 0.0), whole)


__all__ = ["MAX_STEPS", "FILE_KINDS", "content_words", "path_words", "normalise_paths", "split_steps",
           "request_steps", "pack_steps", "fuse_steps"]
