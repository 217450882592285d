"""`riskrank-jax fit`: train a Ranker's heads on your own log of (query, tools used), or keep it zero-shot.

    ranker, report = fit_ranker(["examples/mcp_tools.json"], "log.jsonl")
    ranker.save("my_ranker")                     # then: riskrank-jax rank ... --model my_ranker

Every ``heldout_every``-th logged query is held out. The dual heads (``model.train.train_models``, one fold, the
given seeds) are trained on the rest, with the registry's assessed risk levels as the risk target, and
scored as a Ranker (head f_rel − λ·risk, graph with co-occurrence edges from the training queries) on
the held-out queries by NDCG@k, against the zero-shot ranker (``Ranker.from_registry``'s defaults). When
the heads beat it on average over seeds, the best seed's settings are retrained on every logged query
and that Ranker is returned; otherwise the zero-shot ranker is (a small log rarely beats the hybrid
first stage). The report says which and why, with the measured numbers.

Why it may keep the zero-shot ranker: a small log rarely beats it, and a worse trained ranker must not win.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

import numpy as np

from riskrank_jax import metrics
from riskrank_jax.data.permissions import permission_mask_words
from riskrank_jax.errors import DataError
from riskrank_jax.graph.tool_graph import build_tool_graph
from riskrank_jax.rank.query_log import read_query_log
from riskrank_jax.rank.ranker import RankConfig, Ranker
from riskrank_jax.rank.registry_inputs import REGISTRY_MAX_NEIGHBOURS


@dataclass(frozen=True)
class FitConfig:
    """seeds: one model per seed; epochs of train_models; heldout_every: every n-th query is held out;
    lam / alpha: the trained ranker's λ (on f_rel's scale) and graph α; k: the NDCG cut-off."""

    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int = 10
    heldout_every: int = 5
    lam: float = 0.1
    alpha: float = 0.2
    k: int = 5


def _head_ranker(zero: Ranker, params, gold, cfg: FitConfig, provenance: dict) -> Ranker:
    perm = permission_mask_words(zero.tool_texts)
    graph = (build_tool_graph(zero.tool_emb, perm, zero.risk_levels, gold, max_neighbours=REGISTRY_MAX_NEIGHBOURS)
             if cfg.alpha > 0 else None)  # bounded as the zero-shot registry graph is (O(N) edges)
    return Ranker.build(encoder_id=zero.encoder_id, tool_names=zero.tool_names, tool_texts=zero.tool_texts,
                        tool_emb=zero.tool_emb, risk_levels=zero.risk_levels, perm_level=zero.perm_level,
                        params=params, graph=graph, risk_source=zero.risk_source, risk_scores=zero.risk_scores,
                        config=RankConfig(lam=cfg.lam, alpha=cfg.alpha, k=cfg.k, first_stage="dense"),
                        provenance=provenance)


def _ndcg(ranker: Ranker, q_emb, texts, gold, k: int) -> float:
    ids = ranker.rank(q_emb, k=k, q_texts=list(texts))
    return float(np.asarray(metrics.ndcg_at_k(ids, gold, k=k)).mean())


def _train(zero: Ranker, q_emb, gold, mask, seeds, cfg: FitConfig):
    from riskrank_jax.model.train import TrainConfig, TrainRun, train_models

    return train_models(zero.tool_emb, q_emb, gold, zero.risk_levels, mask[None], TrainConfig(epochs=cfg.epochs),
                        TrainRun(tuple(seeds), progress=False))


def fit_ranker(files, log_path, *, encoder=None, cache=None, config: FitConfig = FitConfig(),
               zero_shot_config: RankConfig | None = None, risk_head=None, trust_annotations: bool = False):
    """(Ranker, report dict) — see the module docstring. Raises DataError for a bad or too short log."""
    from riskrank_jax.encode.embedding_cache import embed_texts

    zero = Ranker.from_registry(files, encoder=encoder, cache=cache, config=zero_shot_config,
                                risk_head=risk_head, trust_annotations=trust_annotations)
    log = read_query_log(log_path, zero.tool_names)
    held = np.arange(log.size) % config.heldout_every == config.heldout_every - 1
    if held.sum() < 1 or (~held).sum() < 2:
        raise DataError(f"{log.size} logged queries; need at least {max(config.heldout_every, 3)} (every "
                        f"{config.heldout_every}th is held out to check the trained ranker)", log_path)
    k = min(config.k, zero.size)
    q_emb = embed_texts(zero.query_encoder(), list(log.queries), cache)
    texts = np.array(log.queries, dtype=object)
    res = _train(zero, q_emb, log.gold, ~held, config.seeds, config)
    ev = (q_emb[held], texts[held], log.gold[held], k)
    zero_ndcg = _ndcg(zero, *ev)
    head_ndcg = [_ndcg(_head_ranker(zero, res.model_params(m), log.gold[~held], config, {}), *ev)
                 for m in range(res.n_models)]
    report = {"log": str(log_path), "queries": log.size, "heldout": int(held.sum()), "k": k,
              f"ndcg@{k}_zero_shot": round(zero_ndcg, 4), f"ndcg@{k}_head_per_seed": [round(x, 4) for x in head_ndcg],
              "fit": asdict(config)}
    if float(np.mean(head_ndcg)) > zero_ndcg:
        best = config.seeds[int(np.argmax(head_ndcg))]
        final = _train(zero, q_emb, log.gold, np.ones(log.size, bool), (best,), config)
        report.update(chosen="head", seed=best,
                      why=f"the heads beat the zero-shot ranker on held-out queries (NDCG@{k} mean "
                          f"{np.mean(head_ndcg):.3f} vs {zero_ndcg:.3f}); retrained on all {log.size} queries")
        ranker = _head_ranker(zero, final.model_params(0), log.gold, config, {**zero.provenance, "fit": report})
    else:
        report.update(chosen="zero-shot",
                      why=f"the heads did not beat the zero-shot ranker on held-out queries (NDCG@{k} mean "
                          f"{np.mean(head_ndcg):.3f} vs {zero_ndcg:.3f}); saved the zero-shot ranker")
        ranker = Ranker.build(**_zero_fields(zero), provenance={**zero.provenance, "fit": report})
    return dataclasses.replace(ranker, encoder=zero.encoder), report


def _zero_fields(zero: Ranker) -> dict:
    return dict(encoder_id=zero.encoder_id, tool_names=zero.tool_names, tool_texts=zero.tool_texts,
                tool_emb=zero.tool_emb, risk_levels=zero.risk_levels, perm_level=zero.perm_level, graph=zero.graph,
                risk_source=zero.risk_source, risk_scores=zero.risk_scores, config=zero.config)


__all__ = ["FitConfig", "fit_ranker"]
