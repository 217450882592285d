"""Models trained on another benchmark's training data, applied to LiveMCPBench without any of its tasks.

    enc, info = source_tuned_encoder(cfg, encoder, cache, ckpt_root)     # the encoder tuned on Seal-Tools' train
    ce, info = source_cross_encoder(cfg, encoder, cache, ckpt_root)      # the cross-encoder trained there

Both train on ``SOURCE``'s training queries only (Seal-Tools: its 700 training queries over its 4,076 tools), the
way that benchmark's sweep trains them (``experiments.tuned``: the top ``cfg.tune.layers`` layers, hard negatives
from the hybrid first stage, the epoch with the best NDCG@5 of the tuned cosine on a held-out 20 % of the training
queries; ``model.cross_encoder``: the encoder as a cross-encoder, listwise over gold and 4 hard negatives among
the hybrid's top 20, its gate γ chosen on the held-out 20 %). One seed each (``SEED``). Everything that decides
the model (data, encoder, configuration) is hashed into its directory under ``<checkpoints>/livemcpbench/``:
the tuned encoder is saved there as a Hugging Face BERT directory and the cross-encoder's orbax run with its
report, so a second sweep loads them instead of training.

Why Seal-Tools: its tools are one-function APIs with descriptions, like an MCP server's; its training split is
small enough to train on this CPU; and LiveMCPBench's 95 tasks are too few to train on.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.data.sealtools import load_sealtools
from riskrank_jax.encode.embedding_cache import embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.errors import DataError
from riskrank_jax.experiments.stages import short_hash
from riskrank_jax.model.cross_encoder import CrossEncoderConfig, init_from_encoder
from riskrank_jax.model.cross_encoder_train import ce_scores_for, train_cross_encoder
from riskrank_jax.model.encoder_tune import TextStates, embed_states, save_tuned_encoder, tune_encoder
from riskrank_jax.model.heldout import heldout_split
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.paths import resolve_data_dir
from riskrank_jax.rank.registry_inputs import registry_graph
from riskrank_jax.retrieve import first_stage, hybrid

SOURCE = "sealtools"
SEED = 0
HARD_POOL = 40  # as experiments.tuned: the first stage's best non-gold tools searched for hard negatives
HELDOUT_FRACTION = 0.2
CE_TOP = 20  # ranker_server's candidates the cross-encoder reranks (the cross_encoder_sealtools row)


def source_benchmark(cfg):
    """The Seal-Tools benchmark under the data directory (DataError naming the folder when it is missing)."""

    root = resolve_data_dir(cfg.data.data_dir) / "seal_tools"
    if not root.is_dir():
        raise DataError(f"{root} does not exist: the transfer rows train on Seal-Tools' training split "
                        "(docs/data.md, 'Seal-Tools')")
    return load_sealtools(root)


def _first_stage(bench, encoder, cache) -> np.ndarray:
    """float32 [Q, N]: the frozen hybrid (default weight) of the source's training queries over its named tools."""
    t = embed_texts(encoder, list(bench.tools.named_texts), cache)
    q = embed_texts(encoder, list(bench.train.texts), cache)
    bm = first_stage.Bm25Index(list(bench.tools.named_texts)).scores(list(bench.train.texts))
    return np.asarray(hybrid.fuse(first_stage.dense_scores(q, t), bm, hybrid.DEFAULT_WEIGHT), np.float32)


def _ndcg5(scores, gold) -> float:
    top = np.argsort(-np.asarray(scores, np.float32), axis=1, kind="stable")[:, :5]
    return float(np.asarray(metrics.ndcg_at_k(jnp.asarray(top), jnp.asarray(gold), k=5)).mean())


def _model_dir(ckpt_root: Path, kind: str, bench, encoder_id: str, config: dict) -> Path:
    key = short_hash([kind, bench.name, bench.fingerprint(), encoder_id, config, SEED, HELDOUT_FRACTION, HARD_POOL])
    return Path(ckpt_root).resolve() / "livemcpbench" / f"{kind}-{bench.name}-{key}"


def source_tuned_encoder(cfg, encoder, cache, ckpt_root: Path):
    """(the encoder tuned on the source's training queries, info {"dir", "trained_s", "heldout_ndcg@5_by_epoch",
    "epoch", ...}): loaded from its directory when a previous sweep saved it, else trained (``cfg.tune``) and saved."""

    bench = source_benchmark(cfg)
    base = encoder.load() if hasattr(encoder, "load") else encoder
    out = _model_dir(ckpt_root, "tuned", bench, base.model_id, cfg.tune.to_dict())
    enc_dir, info_file = out / "encoder", out / "transfer.json"
    if not info_file.is_file():
        info_file.parent.mkdir(parents=True, exist_ok=True)
        info_file.write_text(json.dumps(_train_tuned(cfg, bench, base, cache, out, enc_dir), indent=1) + "\n")
    info = json.loads(info_file.read_text())
    return load_encoder(enc_dir), {**info, "dir": str(out)}


def _train_tuned(cfg, bench, base, cache, out: Path, enc_dir: Path) -> dict:

    t0 = time.perf_counter()
    n_tools, gold = bench.tools.size, np.asarray(bench.train.gold)
    texts, where, q_rows = list(bench.tools.named_texts), {}, []
    for q in bench.train.texts:  # each unique query text once
        if q not in where:
            where[q] = len(texts)
            texts.append(q)
        q_rows.append(where[q])
    q_rows, t_rows = np.asarray(q_rows, np.int64), np.arange(n_tools)
    states = TextStates.build(base, texts, base.shape.num_layers - cfg.tune.layers)
    states_s = time.perf_counter() - t0
    first = _first_stage(bench, base, cache)
    train_ids, held = heldout_split(np.arange(gold.shape[0]), HELDOUT_FRACTION, SEED)
    hard = np.asarray(best_non_gold(first, gold, HARD_POOL))

    def heldout_ndcg(t) -> float:  # the tuned cosine on the held-out training queries: which epoch to keep
        v = embed_states(t, base, states, np.concatenate([t_rows, q_rows[held]]))
        return _ndcg5(v[n_tools:] @ v[:n_tools].T, gold[held])

    tuned = tune_encoder(base, states, q_rows, t_rows, gold, train_ids, hard, SEED, cfg.tune,
                         checkpoint_dir=out / "run", data_id=short_hash([bench.fingerprint(), base.model_id]),
                         desc=f"[livemcpbench] tuning the encoder on {bench.name}'s training queries",
                         evaluate=heldout_ndcg)
    save_tuned_encoder(base, tuned, enc_dir)
    return {"source": bench.name, "source_protocol": bench.protocol, "train_queries": int(train_ids.size),
            "heldout_queries": int(held.size), "heldout_ndcg@5_frozen_hybrid": round(_ndcg5(first[held], gold[held]), 4),
            "heldout_ndcg@5_by_epoch": [round(float(x), 4) for x in tuned.epoch_scores],
            "epoch": int(np.nanargmax(tuned.epoch_scores)) + 1, "steps": int(tuned.losses.size),
            "config": cfg.tune.to_dict(), "seed": SEED, "lower_layer_states_s": round(states_s, 1),
            "trained_s": round(time.perf_counter() - t0, 1)}


def source_cross_encoder_scores(cfg, encoder, cache, ckpt_root: Path, query_texts, tool_texts, cand, config=None):
    """(float32 [Q, C] scores of the pairs (query q, tool cand[q, c]), info {"gate", "heldout_ndcg@5_by_gate",
    "trained_s", "scored_s", ...}) by the cross-encoder trained on the source's training queries
    (``model.cross_encoder.train_cross_encoder``, initialised from ``encoder``'s directory, its orbax run under the
    checkpoint root: a finished run is reused without training). The scores are saved beside the run, keyed by
    the texts and candidates, so a second sweep neither trains nor scores."""

    config = CrossEncoderConfig() if config is None else config
    bench = source_benchmark(cfg)
    base = encoder.load() if hasattr(encoder, "load") else encoder
    out = _model_dir(ckpt_root, "cross_encoder", bench, base.model_id, config.to_dict())
    info_file = out / "transfer.json"
    cand = np.asarray(cand, np.int32)
    scores_file = out / f"scores-{short_hash([list(query_texts), list(tool_texts), cand.tolist()])}.npz"
    if info_file.is_file() and scores_file.is_file():
        with np.load(scores_file) as z:
            return z["scores"], {**json.loads(info_file.read_text()), "dir": str(out), "scored_s": float(z["seconds"])}
    t0 = time.perf_counter()
    ce = init_from_encoder(getattr(base, "model_dir", None), seed=SEED, max_tokens=config.max_tokens)
    first = _first_stage(bench, base, cache)
    tuned, report = train_cross_encoder(ce, list(bench.train.texts), np.asarray(bench.train.gold),
                                        list(bench.tools.named_texts), first, SEED, config,
                                        checkpoint_dir=out / "run")
    info = {"source": bench.name, "source_protocol": bench.protocol, "gate": float(report["gate"]),
            "heldout_ndcg@5_by_gate": {str(g): round(float(v), 4) for g, v in report["heldout_ndcg@5_by_gate"].items()},
            "steps": report["steps"], "train_pairs": report["train_pairs"],
            "train_queries": len(report["train_queries"]), "heldout_queries": len(report["heldout_queries"]),
            "config": config.to_dict(), "seed": SEED}
    if info_file.is_file():  # trained by an earlier sweep: keep its training seconds
        info["trained_s"] = json.loads(info_file.read_text()).get("trained_s")
    else:
        info["trained_s"] = round(time.perf_counter() - t0, 1)
        info_file.write_text(json.dumps(info, indent=1) + "\n")
    t1 = time.perf_counter()
    scores = np.asarray(ce_scores_for(tuned, list(query_texts), list(tool_texts), cand,
                                      batch_size=config.score_batch_size), np.float32)
    seconds = round(time.perf_counter() - t1, 1)
    np.savez(scores_file, scores=scores, seconds=np.float32(seconds))
    return scores, {**info, "dir": str(out), "scored_s": seconds}


def with_encoder(ranker, encoder, cache, server_texts: list[str]):
    """``ranker`` (a registry Ranker) with another encoder's vectors: its tools' texts and its servers'
    (``server_texts``, one per row of ``ranker.server_emb``) embedded by ``encoder``, the graph rebuilt on them as
    ``rank.fit`` rebuilds a tuned ranker's; config, risk levels, scores and sources as they are (the risk was
    assessed with the base encoder, as ``riskrank-jax fit --tune-encoder`` keeps it)."""
    emb = np.asarray(embed_texts(encoder, list(ranker.tool_texts), cache), np.float32)
    graph = None
    if ranker.graph is not None:
        graph = registry_graph(emb, ranker.tool_texts, ranker.risk_levels)
    server_emb = ranker.server_emb
    if server_emb is not None:
        if len(server_texts) != server_emb.shape[0]:
            raise ValueError(f"{len(server_texts)} server texts for {server_emb.shape[0]} servers")
        server_emb = np.asarray(embed_texts(encoder, list(server_texts), cache), np.float32)
    return dataclasses.replace(ranker, encoder_id=encoder.model_id, tool_emb=emb, graph=graph, encoder=encoder,
                               server_emb=server_emb)


__all__ = ["SOURCE", "with_encoder", "source_benchmark", "source_tuned_encoder", "source_cross_encoder_scores"]
