"""The request stages of a Ranker: multi-step requests and the server as context, on the first stage's scores.

    scores = staged_first_stage(ranker, q, q_texts, plain)      # [Q, N], what the penalty and graph then use

``plain(q, texts)`` is the ranker's own first stage (cosine, BM25 or the hybrid of q [Q, d]). With
``config.server_context`` (and a ranker that knows each tool's server) every scored text gets its server's
evidence (``retrieve.servers.server_context``); with ``config.multi_step`` the request's paths become words, its
steps (``retrieve.steps.pack_steps``) are embedded and scored the same way, and the best step's z-score is added
(``retrieve.steps.fuse_steps``). Off, both leave the first stage's scores as they are.

Why here and not in the jitted stages: splitting a request is text work on the host, and embedding its steps
needs the ranker's encoder; what follows (fusion, penalty, graph, top k) stays jitted.
"""

from __future__ import annotations

import numpy as np

from riskrank_jax.errors import RankerError
from riskrank_jax.retrieve import first_stage, servers, steps


def with_server_context(ranker, q, scores):
    """``scores`` [Q, N] with the server evidence of q [Q, d] when the config asks for it and the ranker knows
    the tools' servers; else ``scores`` unchanged."""
    cfg = ranker.config
    if not cfg.server_context or ranker.tool_server is None:
        return scores
    return servers.server_context(scores, first_stage.dense_scores(q, ranker.server_emb), ranker.tool_server,
                                  cfg.server_weight, cfg.sibling_weight)


def _bucket(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def staged_first_stage(ranker, q, q_texts, plain):
    """The first stage's scores [Q, N] of q [Q, d] (texts ``q_texts``) after the request stages of
    ``ranker.config``; ``plain(q, texts)`` computes the first stage itself."""
    cfg = ranker.config
    if not cfg.multi_step:
        return with_server_context(ranker, q, plain(q, q_texts))
    if q_texts is None or len(q_texts) != q.shape[0]:
        raise RankerError("multi_step needs the query texts, one per query embedding")
    whole_texts = [steps.normalise_paths(t) for t in q_texts]
    changed = [i for i, (a, b) in enumerate(zip(whole_texts, q_texts)) if a != b]
    flat, index = steps.pack_steps(q_texts, cfg.max_steps)
    new = [whole_texts[i] for i in changed] + flat
    emb = ranker.encode_queries(new) if new else np.zeros((0, q.shape[1]), np.float32)
    whole_q = np.array(q, np.float32)
    whole_q[changed] = emb[:len(changed)]
    whole = with_server_context(ranker, whole_q, plain(whole_q, whole_texts))
    if not flat:
        return whole
    # steps padded to a power of two (repeating the last) and the index to max_steps columns, so the jitted
    # stages compile once per bucket, not once per number of steps
    pad = _bucket(len(flat)) - len(flat)
    step_q = np.concatenate([emb[len(changed):], np.repeat(emb[-1:], pad, axis=0)])
    step_texts = flat + flat[-1:] * pad
    index = np.pad(index, ((0, 0), (0, cfg.max_steps - index.shape[1])), constant_values=-1)
    return steps.fuse_steps(whole, with_server_context(ranker, step_q, plain(step_q, step_texts)), index,
                            cfg.step_weight)


__all__ = ["staged_first_stage", "with_server_context"]
