"""A risk-aware reranker that corrects a first stage instead of replacing it (beyond the paper).

The paper's relevance head learns mostly which tools were training positives, so it collapses on tools it
never saw. This reranker only sees features that mean the same thing for any tool:

    x(q, t) = [z(cos), z(bm25), bm25 / max bm25, cos]                       (per-query z-scores)
    g(q, t) = T · (w · x(q, t) + (U E(q)) · (V E(t)))                       (U, V: d × r, low rank)
    s(q, t) = (1 − γ)·z(hybrid(q, t)) + γ·z(g(q, t)) − λ·f_risk(t)

``w`` starts at the hybrid first stage's weights, so g starts as that first stage; the low-rank bilinear
term learns how query wording maps to tool wording, which transfers to unseen tools because it acts on
embeddings, not on tool identities. Training: listwise softmax cross-entropy of every gold tool against
the hybrid first stage's
best ``negatives`` non-gold tools (hard negatives; the features already separate easy ones), full-batch Adam, with the parameters
of the best held-out NDCG@5 kept. The gate γ ∈ ``gates`` is then chosen on the held-out training queries
(ties go to the smaller γ), so on those queries the reranker never does worse than its first stage
(γ = 0 is the first stage itself). λ is in per-query standard deviations of the relevance score.

Every (seed, fold) model trains in one jitted program mapped over the models (``model.groups.map_models``),
run over groups of models sized by bytes
(``memory_budget``); the held-out NDCG@5 scores only the held-out queries, in blocks sized by bytes.

Why correct rather than replace: its features mean the same for unseen tools, and γ = 0 is the first stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from riskrank_jax import metrics
from riskrank_jax.model.groups import map_models, plan_groups
from riskrank_jax.model.heldout import GATES, gate_index, heldout_split
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.retrieve.hybrid import choose_weights, zscore
from riskrank_jax.runtime.memory import DEFAULT_MEMORY_BUDGET, halved_to_fit
from riskrank_jax.scoring import top_order

N_FEATURES = 4


@dataclass(frozen=True)
class RerankConfig:
    """Hyper-parameters of the correction reranker."""

    low_rank: int = 32  # r of the bilinear factors U, V (d × r)
    lr: float = 3e-3
    steps: int = 300
    eval_every: int = 10
    l2: float = 1e-4
    heldout_fraction: float = 0.1
    negatives: int = 200  # training negatives per query: the hybrid's best non-gold tools
    gates: tuple[float, ...] = GATES

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def features(q_emb, t_emb, bm25):
    """x(q, t) for every pair: q_emb [Q, d], t_emb [N, d], bm25 [Q, N] -> float32 [Q, N, 4]."""
    cos = jnp.asarray(q_emb) @ jnp.asarray(t_emb).T
    b = jnp.asarray(bm25, jnp.float32)
    b_max = jnp.maximum(b.max(-1, keepdims=True), 1e-6)
    return jnp.stack([zscore(cos), zscore(b), b / b_max, cos], axis=-1)


def init_params(key, dim: int, weight: float, rank: int) -> dict:
    """w = [weight, 1 − weight, 0, 0] (the hybrid first stage), U, V ~ N(0, 0.01²), T = 1."""
    ku, kv = jax.random.split(key)
    return {"w": jnp.asarray([weight, 1.0 - weight, 0.0, 0.0], jnp.float32),
            "U": 0.01 * jax.random.normal(ku, (dim, rank), jnp.float32),
            "V": 0.01 * jax.random.normal(kv, (dim, rank), jnp.float32),
            "T": jnp.asarray(1.0, jnp.float32)}


def correction_scores(params, q_emb, t_emb, feats):
    """g(q, t) [Q, N] for one model: params of ``init_params``, feats [Q, N, 4]."""
    bilinear = (q_emb @ params["U"]) @ (t_emb @ params["V"]).T
    return params["T"] * (feats @ params["w"] + bilinear)


def gated_scores(params, weight, gate, q_emb, t_emb, feats):
    """(1 − γ)·z(hybrid) + γ·z(g) [Q, N] for one model (weight: its hybrid w, gate: its γ)."""
    hybrid = weight * feats[..., 0] + (1.0 - weight) * feats[..., 1]
    return (1.0 - gate) * zscore(hybrid) + gate * zscore(correction_scores(params, q_emb, t_emb, feats))


def training_candidates(feats, gold, weight, negatives: int):
    """Per training query: its gold tools, then the ``negatives`` best non-gold tools of the hybrid first
    stage (``model.negatives.best_non_gold``). int32 [Q, G + C]; padded gold slots are -1."""
    hybrid = weight * feats[..., 0] + (1.0 - weight) * feats[..., 1]
    top = best_non_gold(hybrid, gold, negatives)
    return jnp.concatenate([gold, top], axis=-1).astype(jnp.int32)


def candidate_features(feats, cand):
    """x(q, t) of each query's candidates: feats [Q, N, 4], cand int [Q, K] (-1: padding) -> [Q, K, 4]."""
    return jnp.take_along_axis(feats, jnp.maximum(cand, 0)[..., None], axis=1)


@jax.custom_vjp
def pair_products(qu, tv, cand):
    """[Q, K]: qu[q] · tv[cand[q, k]] for qu [Q, r], tv [N, r], cand int [Q, K] (valid ids).

    Computed as one [Q, N] matmul and a gather of K scalars per query, with a custom gradient that scatters the
    [Q, K] cotangent into a dense [Q, N] block and takes two matmuls: on a CPU that is faster per training step
    than gathering the [Q, K, r] factor rows and scatter-adding their gradient (docs/performance.md,
    "Training"); equal up to float rounding."""
    return jnp.take_along_axis(qu @ tv.T, cand, axis=1)


def _pair_products_fwd(qu, tv, cand):
    return pair_products(qu, tv, cand), (qu, tv, cand)


def _pair_products_bwd(res, g):
    qu, tv, cand = res
    dense = jnp.zeros((qu.shape[0], tv.shape[0]), g.dtype).at[jnp.arange(qu.shape[0])[:, None], cand].add(g)
    return dense @ tv, dense.T @ qu, None


pair_products.defvjp(_pair_products_fwd, _pair_products_bwd)


def _loss(params, q_emb, t_emb, f, cand, n_gold, mask, l2):
    """Listwise softmax cross-entropy of each gold tool against the query's candidates (gold first);
    f = ``candidate_features`` (fixed during training, so gathered once, not every step)."""
    valid_c = cand >= 0
    c = jnp.maximum(cand, 0)
    bilinear = pair_products(q_emb @ params["U"], t_emb @ params["V"], c)  # [Q, K]
    logits = params["T"] * (f @ params["w"] + bilinear)
    logp = jax.nn.log_softmax(jnp.where(valid_c, logits, -jnp.inf), axis=-1)
    valid = valid_c[:, :n_gold] & mask[:, None]
    reg = l2 * (jnp.sum(params["U"] ** 2) + jnp.sum(params["V"] ** 2))
    return -(jnp.where(valid, logp[:, :n_gold], 0.0)).sum() / jnp.maximum(valid.sum(), 1) + reg


def _rows_ndcg(score_fn, rows, gold, q_chunk: int):
    """NDCG@5 [H] of the queries ``rows`` (int [H]) under ``score_fn(rows_block)`` -> [C, N] scores, ``q_chunk``
    queries per ``lax.map`` step (so the working set is one [C, N] block; the last block padded)."""
    h = rows.shape[0]
    n_blocks = -(-h // q_chunk)
    blocks = jnp.pad(rows, (0, n_blocks * q_chunk - h)).reshape(n_blocks, q_chunk)
    per_q = jax.lax.map(lambda r: metrics.ndcg_at_k(top_order(score_fn(r), 5), gold[r], k=5), blocks)
    return per_q.reshape(-1)[:h]


def _heldout_ndcg(score_fn, rows, valid, gold, q_chunk: int):
    """Mean NDCG@5 over a model's held-out queries: ``rows`` int [H] padded, ``valid`` bool [H]."""
    per_q = _rows_ndcg(score_fn, rows, gold, q_chunk)
    return (per_q * valid).sum() / jnp.maximum(valid.sum(), 1)


def _train_one(key, weight, train_rows, train_valid, held_rows, held_valid, q_emb, t_emb, feats, gold, *,
               config: RerankConfig, q_chunk: int):
    """Train one model; returns (best params, best held-out NDCG@5, gate γ, held-out NDCG@5 per gate).

    The loss sees only the model's training queries (``train_rows``, ``train_valid``: padded ids, see
    ``heldout_rows``), so a step's [R, N] products cover R of the Q queries. The held-out NDCG@5 is computed on
    the held-out queries only (``held_rows``, ``held_valid``), ``q_chunk`` of them at a time."""
    params = init_params(key, q_emb.shape[1], weight, config.low_rank)
    opt = optax.adam(config.lr)
    grad = jax.grad(_loss)
    train_feats = feats[train_rows]
    cand = training_candidates(train_feats, gold[train_rows], weight, config.negatives)
    f_cand = candidate_features(train_feats, cand)
    train_q = q_emb[train_rows]

    def held(p):
        return _heldout_ndcg(lambda r: correction_scores(p, q_emb[r], t_emb, feats[r]), held_rows, held_valid,
                             gold, q_chunk)

    def step(carry, _):
        p, s = carry
        upd, s = opt.update(grad(p, train_q, t_emb, f_cand, cand, gold.shape[1], train_valid, config.l2), s, p)
        return (optax.apply_updates(p, upd), s), None

    def block(carry, _):
        p, s, best_p, best = carry
        (p, s), _ = jax.lax.scan(step, (p, s), None, length=config.eval_every)
        h = held(p)
        better = h > best
        best_p = jax.tree.map(lambda a, b: jnp.where(better, a, b), p, best_p)
        return (p, s, best_p, jnp.where(better, h, best)), h

    n_blocks = max(1, config.steps // config.eval_every)
    (_, _, best_p, best), _ = jax.lax.scan(block, (params, opt.init(params), params, held(params)), None,
                                           length=n_blocks)
    gates = jnp.asarray(config.gates, jnp.float32)
    per_gate = jax.vmap(lambda g: _heldout_ndcg(
        lambda r: gated_scores(best_p, weight, g, q_emb[r], t_emb, feats[r]), held_rows, held_valid, gold,
        q_chunk))(gates)
    gate = gates[gate_index(per_gate)]  # the smallest γ among ties: never worse than γ = 0 on held-out
    return best_p, best, gate, per_gate


@dataclass
class RerankModels:
    """Stacked reranker parameters, model m = seed_index · F + fold. Arrays have a leading model axis M."""

    params: dict
    weight: np.ndarray  # [M] hybrid weight of each model's first stage
    gate: np.ndarray  # [M]
    heldout_ndcg_by_gate: np.ndarray  # [M, n_gates]
    heldout_mask: np.ndarray  # bool [M, Q_train]
    config: RerankConfig


def heldout_masks(fold_mask, seeds, heldout_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Per model (seed-major, fold-minor): (train mask, held-out mask), bool [M, Q]: ``model.heldout.heldout_split``
    of each fold's training queries on (seed, fold)."""
    fold_mask = np.asarray(fold_mask, bool)
    train, held = [], []
    for seed in seeds:
        for f in range(fold_mask.shape[0]):
            t_ids, h_ids = heldout_split(fold_mask[f], heldout_fraction, seed, f)
            for ids, out in ((t_ids, train), (h_ids, held)):
                m = np.zeros(fold_mask.shape[1], bool)
                m[ids] = True
                out.append(m)
    return np.stack(train), np.stack(held)


def heldout_rows(held_mask) -> tuple[np.ndarray, np.ndarray]:
    """Each model's held-out (or training) query ids, padded to the widest: (rows int32 [M, H], valid bool [M, H])."""
    held_mask = np.asarray(held_mask, bool)
    width = max(1, int(held_mask.sum(1).max()))
    rows = np.zeros((held_mask.shape[0], width), np.int32)
    valid = np.zeros(rows.shape, bool)
    for m, mask in enumerate(held_mask):
        idx = np.flatnonzero(mask)
        rows[m, :idx.size], valid[m, :idx.size] = idx, True
    return rows, valid


def plan_memory(n_queries: int, n_tools: int, n_gold: int, n_held: int, dim: int, config: RerankConfig,
                budget: int) -> tuple[int, int]:
    """(bytes per model, held-out queries per scoring block) of ``train_rerankers``.

    ``n_queries``: the model's training queries (R). A model's training intermediates: one step's [R, K]
    candidate block (gathered features, the low-rank tool factors and their gradients, logits), its rows of the
    features [R, N, 4] and the first stage's [R, N] candidate search, the [N, r] / [R, r] factors and gradients,
    and one held-out scoring block of C queries x N tools for every gate. C is every held-out query unless one
    model would then exceed ``budget`` (halved until it fits, or 1)."""
    k = n_gold + min(config.negatives, n_tools)
    fixed = n_queries * k * (40 + 12 * config.low_rank) + 36 * n_queries * n_tools \
        + 12 * config.low_rank * (n_tools + n_queries + 2 * dim)
    per_row = 40 * n_tools * len(config.gates)
    chunk = halved_to_fit(n_held, per_row, budget, fixed)
    return fixed + chunk * per_row, chunk


def train_rerankers(q_emb, t_emb, bm25, gold, fold_mask, seeds, config: RerankConfig = RerankConfig(), *,
                    fold_weight=None, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> RerankModels:
    """Every (seed, fold) reranker: one jitted program over the model axis (``map_models``) run over equal groups
    of models sized by bytes.

    Args:
      q_emb [Q, d], t_emb [N, d]: training queries and tools; bm25 [Q, N]: BM25 of the training queries;
      gold int [Q, G] padded with -1; fold_mask bool [F, Q]: the training queries of fold f; seeds: S ints.
      fold_weight: [F] hybrid weight of each fold (None: chosen here on each fold's training queries).
      memory_budget: bytes of training intermediates (``plan_memory``); does not change results.
    """
    q_emb, t_emb = jnp.asarray(q_emb, jnp.float32), jnp.asarray(t_emb, jnp.float32)
    feats = features(q_emb, t_emb, bm25)
    if fold_weight is None:
        fold_weight = choose_weights(q_emb @ t_emb.T, bm25, gold, fold_mask)
    fold_weight = np.asarray(fold_weight, np.float32)
    train_mask, held_mask = heldout_masks(fold_mask, seeds, config.heldout_fraction)
    rows, valid = heldout_rows(held_mask)
    t_rows, t_valid = heldout_rows(train_mask)
    n_folds = fold_mask.shape[0]
    weights = np.tile(fold_weight, len(seeds))
    keys = jnp.stack([jax.random.fold_in(jax.random.key(int(s)), f) for s in seeds for f in range(n_folds)])
    per_model, q_chunk = plan_memory(t_rows.shape[1], t_emb.shape[0], np.asarray(gold).shape[1], rows.shape[1],
                                     q_emb.shape[1], config, memory_budget)
    gold_j = jnp.asarray(gold)
    program = jax.jit(map_models(lambda k, w, tr, tv, hr, hv: _train_one(
        k, w, tr, tv, hr, hv, q_emb, t_emb, feats, gold_j, config=config, q_chunk=q_chunk), in_axes=(0,) * 6))
    outs = []
    for ix, n in plan_groups(len(weights), per_model, memory_budget):
        out = program(keys[ix], jnp.asarray(weights[ix]), jnp.asarray(t_rows[ix]), jnp.asarray(t_valid[ix]),
                      jnp.asarray(rows[ix]), jnp.asarray(valid[ix]))
        outs.append(jax.tree.map(lambda x: np.asarray(x)[:n], out))  # noqa: B023
    params, _, gate, per_gate = jax.tree.map(lambda *xs: np.concatenate(xs), *outs)
    return RerankModels(jax.tree.map(jnp.asarray, params), weights, gate, per_gate, held_mask, config)


@jax.jit
def _all_model_scores(params, weight, gate, q_emb, t_emb, feats):
    return jax.lax.map(lambda a: gated_scores(a[0], a[1], a[2], q_emb, t_emb, feats), (params, weight, gate))


def all_model_scores(models: RerankModels, q_emb, t_emb, bm25):
    """Gated scores of every query under every model: [M, Q, N]. The models run one after another
    (``lax.map``), so the working set is one [Q, N] block per model. One compiled program per shape (the
    embeddings are arguments, not constants baked into the program)."""
    q_emb, t_emb = jnp.asarray(q_emb, jnp.float32), jnp.asarray(t_emb, jnp.float32)
    return _all_model_scores(models.params, jnp.asarray(models.weight), jnp.asarray(models.gate), q_emb, t_emb,
                             features(q_emb, t_emb, bm25))


def rerank_scores(models: RerankModels, q_emb, t_emb, bm25, *, n_seeds: int, test_fold):
    """Gated scores of test queries, each by its own fold's model: [S, Q, N]."""
    scores = all_model_scores(models, q_emb, t_emb, bm25)
    scores = scores.reshape(n_seeds, scores.shape[0] // n_seeds, *scores.shape[1:])
    fold = jnp.asarray(test_fold)
    return scores[:, fold, jnp.arange(fold.shape[0]), :]


__all__ = ["RerankConfig", "RerankModels", "features", "init_params", "correction_scores", "gated_scores",
           "heldout_masks", "train_rerankers", "all_model_scores", "rerank_scores",
           "training_candidates", "candidate_features", "heldout_rows", "plan_memory", "pair_products"]
