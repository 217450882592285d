"""`python -m riskrank_jax.sweep`: the paper's experiments in one run, as tables, JSON and plots.

For each benchmark: embed every text once (cached), train every model in one vmapped program per
variant (checkpoints reused), build the ToolGraph(s), then evaluate every variant with the evaluation
vectorised over queries, seeds and λ values. Writes experiments/results/<benchmark>/{results.json,
tables.md, lambda_sweep.png, tradeoff.png}.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click
import numpy as np

from riskrank_jax.errors import RiskRankError

DEFAULT_ALPHA = {"ultratool": 0.2, "sealtools": 0.02, "demo": 0.2}
MAIN_SPLIT = {"ultratool": "test", "sealtools": "test_in", "demo": "test"}
EDGE_SUBSETS = {
    "no_graph": (),
    "cooccur": ("cooccur",),
    "semantic": ("semantic",),
    "permission": ("permission",),
    "risk_cooccur": ("risk_cooccur",),
    "all_four": ("cooccur", "semantic", "permission", "risk_cooccur"),
}
RESULT_METRICS = ("ndcg@5", "ndcg@10", "sndcg@5", "mrr", "recall@10", "success@5", "rvr@5", "srr@5")
CONTEXT_METRICS = ("safe_rvr@5", "needrisk_hit@5", "rvr@5_high_risk")


@dataclass(frozen=True)
class SweepConfig:
    """What one sweep over one benchmark computes."""

    benchmark: str = "demo"
    seeds: tuple[int, ...] = (42, 123, 777)
    lambdas: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2)
    main_lambda: float = 0.1
    alpha: float | None = None  # None: SPEC §7's per-benchmark value
    k: int = 5
    n_candidates: int = 100
    stress_n: int = 30
    encoder: str | None = None
    lambda_aware: bool = True
    core_plus: bool = True
    zeroshot: bool = True
    smoothing_benchmark: bool = True
    epochs: int = 10  # SPEC §5; lower only for smoke tests

    @property
    def alpha_value(self) -> float:
        return DEFAULT_ALPHA.get(self.benchmark, 0.2) if self.alpha is None else float(self.alpha)


@dataclass
class StageLog:
    """Progress line per stage with its time; the times end up in results.json."""

    benchmark: str
    timings: dict = field(default_factory=dict)

    def run(self, name, fn, *args, **kwargs):
        click.echo(f"[{self.benchmark}] {name} ...", err=True)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        dt = time.perf_counter() - t0
        self.timings[name] = round(self.timings.get(name, 0.0) + dt, 3)
        click.echo(f"[{self.benchmark}] {name} done in {dt:.1f}s", err=True)
        return out


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------- stages


def embed_all(bench, encoder, cache):
    """Embeddings of tools, training queries and each test split; every unique text encoded once."""
    from riskrank_jax.embed_cache import embed_texts

    texts = list(bench.tools.descriptions) + list(bench.train.texts)
    for qs in bench.tests.values():
        texts += list(qs.texts)
    vecs = embed_texts(encoder, texts, cache)
    n_t, n_tr = bench.tools.size, bench.train.size
    out = {"tools": vecs[:n_t], "train": vecs[n_t:n_t + n_tr]}
    pos = n_t + n_tr
    for split, qs in bench.tests.items():
        out[split] = vecs[pos:pos + qs.size]
        pos += qs.size
    return out


def train_variant(bench, emb, cfg: SweepConfig, train_cfg, name: str, encoder_id: str, ckpt_root: Path):
    from riskrank_jax.train import train_models

    meta = {"benchmark": bench.name, "protocol": bench.protocol, "encoder": encoder_id, "variant": name,
            "seeds": list(cfg.seeds), "folds": bench.n_folds, "data": bench.fingerprint()}
    run_dir = ckpt_root / bench.name / f"{name}-{_hash([meta, dataclasses.asdict(train_cfg)])}"
    return train_models(emb["tools"], emb["train"], bench.train.gold, bench.tools.risk, bench.train_fold_mask,
                        tuple(cfg.seeds), train_cfg, checkpoint_dir=run_dir, run_meta=meta, progress=True)


def train_risk_only(t_emb, risk, seeds, *, epochs: int = 30, batch_size: int = 64, lr: float = 1e-3,
                    hidden: int = 64):
    """Zero-shot deployment (beyond the paper): the risk head alone, MSE to (r-1)/4 over the registry's tools.

    One jitted program over all seeds (vmapped). Returns predicted risk [S, N].
    """
    import jax
    import jax.numpy as jnp
    import optax

    from riskrank_jax import model as model_lib

    t_emb = jnp.asarray(t_emb)
    target = (jnp.asarray(risk, jnp.float32) - 1.0) / 4.0
    n, d = t_emb.shape
    batch_size = min(batch_size, n)
    steps = n // batch_size
    opt = optax.adam(lr)

    def one(seed, t_emb, target):
        key = jax.random.key(seed)
        key, init_key = jax.random.split(key)
        params = model_lib.init_params(init_key, d, hidden)
        state = opt.init(params)

        def loss_fn(p, idx):
            return jnp.mean((model_lib.risk(p, t_emb[idx]) - target[idx]) ** 2)

        def epoch(carry, ekey):
            p, s = carry
            perm = jax.random.permutation(ekey, n)[: steps * batch_size].reshape(steps, batch_size)

            def step(c, idx):
                p, s = c
                loss, g = jax.value_and_grad(loss_fn)(p, idx)
                upd, s = opt.update(g, s, p)
                return (optax.apply_updates(p, upd), s), loss

            (p, s), losses = jax.lax.scan(step, (p, s), perm)
            return (p, s), losses.mean()

        (params, _), _ = jax.lax.scan(epoch, (params, state), jax.random.split(key, epochs))
        return model_lib.risk(params, t_emb)

    program = jax.jit(jax.vmap(one, in_axes=(0, None, None)))
    return program(jnp.asarray(seeds, dtype=jnp.uint32), t_emb, target)


def select_stress_queries(dense_ranking, gold, risk, n: int):
    """SPEC §10 / Table 7: gold all safe (r <= 2) and the dense top-10 holds >= 2 tools with r >= 3.

    When more than n qualify, the n with the most risky tools in the dense top-10 are kept (ties: query order).
    Returns (indices, rule text).
    """
    dense_ranking = np.asarray(dense_ranking)
    g_risk = np.where(gold >= 0, risk[np.maximum(gold, 0)], 0)
    safe_gold = (g_risk <= 2).all(-1)
    risky_top10 = (risk[dense_ranking[:, :10]] >= 3).sum(-1)
    ok = np.nonzero(safe_gold & (risky_top10 >= 2))[0]
    order = ok[np.lexsort((ok, -risky_top10[ok]))]
    chosen = np.sort(order[:n])
    rule = (f"queries whose gold tools all have r <= 2 and whose dense top-10 holds >= 2 tools with r >= 3 "
            f"({ok.size} qualify); the {min(n, ok.size)} with the most such tools kept, ties by query order")
    return chosen, rule


def variant_train_configs(cfg: SweepConfig, n_tools: int) -> dict:
    """{run name: (progress label, TrainConfig)} of every trained variant of a sweep."""
    from riskrank_jax.train import TrainConfig

    out = {"core": ("core (seeds x folds)", TrainConfig(epochs=cfg.epochs))}
    if cfg.lambda_aware:
        out["lambda_aware"] = ("lambda-aware (seeds x folds x lambdas)",
                               TrainConfig(epochs=cfg.epochs, lambda_aware=True, lambdas=tuple(cfg.lambdas)))
    if cfg.core_plus:
        out["core_plus"] = ("core_plus (interact head + 2 hard / 3 uniform negatives)",
                            TrainConfig(epochs=cfg.epochs, rel_features="interact", negatives="mixed",
                                        hard_pool=min(50, n_tools // 2)))
    return out


class Evaluator:
    """Per-query metrics of rankings [..., Q, L] for one split, reduced to means over queries."""

    def __init__(self, gold, risk, k):
        import jax.numpy as jnp

        self.gold = jnp.asarray(gold)
        self.risk = jnp.asarray(risk)
        self.k = k

    def per_query(self, ranking) -> dict[str, np.ndarray]:
        from riskrank_jax import metrics

        out = metrics.compute_all(ranking, self.gold, self.risk, k=self.k)
        return {name: np.asarray(v) for name, v in out.items()}


def per_lambda(pq: dict, lambdas) -> dict:
    """Split per-query metrics with a leading λ axis ({m: [L, ...]}) into {λ: {m: [...]}}."""
    return {lv: {m: v[i] for m, v in pq.items()} for i, lv in enumerate(lambdas)}


def reduce_queries(pq: dict, where=None) -> dict[str, np.ndarray]:
    """Means over the query axis (last), plus the context metrics, each [...] over leading axes."""
    from riskrank_jax import metrics

    sel = None if where is None else np.zeros(pq["ndcg@5"].shape[-1], bool)
    if where is not None:
        sel[where] = True
        pq = {k: v[..., sel] for k, v in pq.items()}
    means = {k: np.asarray(v) for k, v in metrics.mean_metrics({m: pq[m] for m in RESULT_METRICS}).items()}
    ctx = {k: np.asarray(v) for k, v in metrics.context_metrics(pq).items()}
    return {**means, **ctx}


def pick(reduced: dict, keys) -> dict:
    """Mean ± std over seeds of the chosen metrics of `reduce_queries` output."""
    return summarize_seeds({m: reduced[m] for m in keys})


def summarize_seeds(values: dict) -> dict:
    """{metric: [S] (or scalar)} -> {metric: {"mean", "std"}} (sample std over seeds)."""
    from riskrank_jax import metrics

    return metrics.summarize({k: np.atleast_1d(v) for k, v in values.items()})


# ---------------------------------------------------------------------------------------------- one benchmark


def run_benchmark(cfg: SweepConfig, *, data_dir=None, out_root: Path, cache_dir=None, ckpt_root: Path,
                  force: bool = False, bench=None, encoder=None) -> dict:
    """Run every stage for one benchmark and write its outputs. `bench` / `encoder` may be given directly
    (tests inject a tiny benchmark and a fake encoder); otherwise they are loaded by name."""
    import jax
    import jax.numpy as jnp

    from riskrank_jax import graph as graph_lib
    from riskrank_jax import pipeline as P
    from riskrank_jax import retrievers
    from riskrank_jax.data import load_benchmark
    from riskrank_jax.embed_cache import EmbeddingCache
    from riskrank_jax.encoder import load_encoder

    log = StageLog(cfg.benchmark)
    out_dir = out_root / cfg.benchmark
    if bench is None:
        bench = log.run("load data", load_benchmark, cfg.benchmark, data_dir)
    if encoder is None:
        encoder = log.run("load encoder", load_encoder, cfg.encoder)
    cache = EmbeddingCache(cache_dir)
    emb = log.run("embed (cached)", embed_all, bench, encoder, cache)

    run_key = _hash([dataclasses.asdict(cfg), bench.fingerprint(), encoder.model_id, RESULTS_VERSION,
                     {k: c.to_dict() for k, (_, c) in variant_train_configs(cfg, bench.tools.size).items()}])
    results_path = out_dir / "results.json"
    if not force and results_path.is_file():
        try:
            prev = json.loads(results_path.read_text())
        except json.JSONDecodeError:
            prev = {}
        if prev.get("run_key") == run_key:
            click.echo(f"[{cfg.benchmark}] results up to date ({results_path}); skipping (use --force to redo)",
                       err=True)
            return prev

    tools = bench.tools
    risk_np = tools.risk
    perm_level = tools.perm_level
    t_emb = jnp.asarray(emb["tools"])
    S = len(cfg.seeds)
    alpha = cfg.alpha_value
    lam = cfg.main_lambda

    # ---- training (one vmapped program per variant; checkpoints reused)
    variants = variant_train_configs(cfg, bench.tools.size)
    runs = {}
    for name, (label, train_cfg) in variants.items():
        runs[name] = log.run(f"train {label}", train_variant, bench, emb, cfg, train_cfg, name, encoder.model_id,
                             ckpt_root)
    core = runs["core"]
    zs_risk = None
    if cfg.zeroshot:
        zs_risk = np.asarray(log.run("train zero-shot risk heads", train_risk_only, emb["tools"], risk_np,
                                     cfg.seeds, epochs=3 * cfg.epochs))  # [S, N]

    # ---- graphs
    def build_graphs():
        fold_graphs = graph_lib.build_fold_graphs(emb["tools"], tools.perm_mask, risk_np, bench.train.gold,
                                                  bench.train_fold_mask)
        empty_gold = np.full((1, 1), -1, np.int32)
        zs_graph = graph_lib.build_tool_graph(emb["tools"], tools.perm_mask, risk_np, empty_gold)
        return fold_graphs, zs_graph

    fold_graphs, zs_graph = log.run("build ToolGraph(s)", build_graphs)
    graph_stats = [graph_lib.stats(g, perm_level) for g in fold_graphs]

    results = {
        "benchmark": bench.name, "protocol": bench.protocol, "encoder": encoder.model_id,
        "seeds": list(cfg.seeds), "lambdas": list(cfg.lambdas), "main_lambda": lam, "alpha": alpha,
        "k": cfg.k, "n_candidates": cfg.n_candidates, "main_split": MAIN_SPLIT.get(bench.name),
        "splits": {s: q.size for s, q in bench.tests.items()},
        "graph": graph_stats[0] if len(graph_stats) == 1 else {"per_fold": graph_stats},
        "training": {name: _training_summary(r) for name, r in runs.items()},
        "main": {}, "lambda_sweep": {}, "edge_ablation": {}, "context": {}, "stress": {}, "exposure": {},
        "std": "sample standard deviation over seeds (ddof=1); baselines without seeds have std 0",
    }

    def evaluate_split(split):
        qs = bench.tests[split]
        fold = bench.test_fold[split]
        q_emb = jnp.asarray(emb[split])
        ev = Evaluator(qs.gold, risk_np, cfg.k)
        pq: dict[str, dict] = {}  # variant -> per-query metrics [S or 1, Q]

        def put(name, ranking):
            r = jnp.asarray(ranking)
            if r.ndim == 2:
                r = r[None]
            pq[name] = ev.per_query(r)

        # baselines
        bm25 = retrievers.bm25_scores(list(tools.descriptions), list(qs.texts))
        put("bm25", P.rank(jnp.asarray(bm25)))
        dense_scores = retrievers.dense_scores(q_emb, t_emb)
        dense_rank = P.rank(dense_scores)
        put("dense", dense_rank)
        rule = lambda r: P.apply_rule_filter(r, risk_np, perm_level, t_emb, k=cfg.k)
        put("rule_only", rule(dense_rank))

        # core family: scores for the whole λ grid at once [L, S, Q, N]
        rel, risk_pred = P.model_scores(core.params, q_emb, t_emb, n_seeds=S, test_fold=fold)
        lambdas = tuple(cfg.lambdas)
        if lam not in lambdas:
            lambdas = lambdas + (lam,)
        grid = P.penalise(rel, risk_pred, jnp.asarray(lambdas))  # [L, S, Q, N]
        grid_g = P.smooth_per_fold(grid, fold_graphs, fold, alpha)
        r_core = P.rank(grid)
        r_graph = P.rank(grid_g)
        r_graph_rule = rule(r_graph)
        li = lambdas.index(lam)
        l0 = lambdas.index(0.0) if 0.0 in lambdas else None
        if l0 is not None:
            put("rel_only", r_core[l0])
        put("core", r_core[li])
        put("core_graph", r_graph[li])
        put("core_graph_rule", r_graph_rule[li])
        sweep_pq = {name: per_lambda(ev.per_query(r), cfg.lambdas)  # metrics over the whole [L, S, Q] grid
                    for name, r in (("core", r_core), ("core_graph", r_graph), ("core_graph_rule", r_graph_rule))}
        del r_core, r_graph, r_graph_rule, grid_g

        # top-100 candidate mode (candidates from dense)
        cand = retrievers.top_candidates(dense_scores, c=min(cfg.n_candidates, tools.size))  # [Q, C]
        s_core = grid[li]  # [S, Q, N]
        cand_s = jnp.take_along_axis(s_core, jnp.broadcast_to(cand, s_core.shape[:-1] + cand.shape[-1:]), axis=-1)
        cand_sg = P.smooth_candidates_per_fold(cand_s, np.asarray(cand), fold_graphs, fold, alpha)
        base = jnp.broadcast_to(dense_rank, s_core.shape[:-2] + dense_rank.shape)
        c_core = P.candidate_ranking(cand_s, cand)
        c_graph = P.candidate_ranking(cand_sg, cand)
        c_rule = rule(c_graph)
        full = lambda c: retrievers.candidate_full_ranking(c.reshape(-1, c.shape[-1]),
                                                           base.reshape(-1, base.shape[-1])).reshape(base.shape)
        put("cand100_core", full(c_core))
        put("cand100_core_graph", full(c_graph))
        put("cand100_core_graph_rule", full(c_rule))

        # edge-type ablation (Table 4) at the main λ and α
        edge_pq = {}
        for name, types in EDGE_SUBSETS.items():
            if not types:
                edge_pq[name] = pq["core"]
                continue
            gs = [graph_lib.with_edge_types(g, types) for g in fold_graphs]
            edge_pq[name] = ev.per_query(P.rank(P.smooth_per_fold(s_core, gs, fold, alpha)))
        del grid, s_core

        # λ-aware training: model l was trained (and is evaluated) at λ_l
        if "lambda_aware" in runs:
            n_l = len(cfg.lambdas)
            # model order is (seed, fold, λ); regroup to (λ, seed, fold) so λ·seed acts as the seed axis
            p = jax.tree.map(lambda x: jnp.swapaxes(x.reshape(S * bench.n_folds, n_l, *x.shape[1:]), 0, 1)
                             .reshape(n_l * S * bench.n_folds, *x.shape[1:]), runs["lambda_aware"].params)
            rel_l, risk_l = P.model_scores(p, q_emb, t_emb, n_seeds=n_l * S, test_fold=fold)
            lam_col = jnp.repeat(jnp.asarray(cfg.lambdas, rel_l.dtype), S)[:, None, None]
            s_l = (rel_l - lam_col * risk_l).reshape(n_l, S, *rel_l.shape[1:])  # model l scored at λ_l
            la_sweep = per_lambda(ev.per_query(P.rank(s_l)), cfg.lambdas)
            sweep_pq["core_lambda_aware"] = la_sweep
            if lam in cfg.lambdas:
                pq["core_lambda_aware"] = la_sweep[lam]

        # beyond the paper: interaction-aware head + hard negatives
        if "core_plus" in runs:
            rel_p, risk_p = P.model_scores(runs["core_plus"].params, q_emb, t_emb, n_seeds=S, test_fold=fold)
            sp = P.penalise(rel_p, risk_p, lam)
            put("core_plus", P.rank(sp))
            rg = P.rank(P.smooth_per_fold(sp, fold_graphs, fold, alpha))
            put("core_plus_graph", rg)
            put("core_plus_graph_rule", rule(rg))

        # beyond the paper: zero-shot registry (no training queries): cosine - λ f_risk
        if zs_risk is not None:
            zs = dense_scores[None] - lam * jnp.asarray(zs_risk)[:, None, :]  # [S, Q, N]
            put("zeroshot_core", P.rank(zs))
            rg = P.rank(P.smooth_per_fold(zs, [zs_graph], fold, alpha))
            put("zeroshot_core_graph", rg)
            put("zeroshot_core_graph_rule", rule(rg))

        # ---- reduce
        reduced = {v: reduce_queries(x) for v, x in pq.items()}
        main = {v: pick(r, RESULT_METRICS) for v, r in reduced.items()}
        context = {v: pick(r, CONTEXT_METRICS) for v, r in reduced.items()}
        lsweep = {v: {str(lv): pick(reduce_queries(x), RESULT_METRICS) for lv, x in d.items()}
                  for v, d in sweep_pq.items()}
        edges = {n: pick(reduce_queries(x), RESULT_METRICS) for n, x in edge_pq.items()}
        idx, rule_text = select_stress_queries(np.asarray(dense_rank), qs.gold, risk_np, cfg.stress_n)
        stress = {"n": int(idx.size), "selection_rule": rule_text, "query_ids": [qs.ids[i] for i in idx],
                  "rows": {}}
        if idx.size:
            for v in ("bm25", "dense", "rule_only", "rel_only", "core", "core_graph", "core_graph_rule",
                      "zeroshot_core_graph_rule", "core_plus_graph_rule"):
                if v in pq:
                    stress["rows"][v] = pick(reduce_queries(pq[v], where=idx), ("ndcg@5", "rvr@5", "srr@5"))
        return main, context, lsweep, edges, stress

    for split in bench.tests:
        main, context, lsweep, edges, stress = log.run(f"evaluate {split}", evaluate_split, split)
        results["main"][split] = main
        results["context"][split] = context
        results["lambda_sweep"][split] = lsweep
        results["edge_ablation"][split] = edges
        results["stress"][split] = stress
        results["exposure"][split] = {v: {m: main[v][m] for m in ("rvr@5", "srr@5")}
                                      for v in ("bm25", "dense", "rule_only", "core_graph", "core_graph_rule")
                                      if v in main}

    if cfg.smoothing_benchmark:
        from riskrank_jax.throughput import smoothing_throughput

        q0 = next(iter(bench.tests.values()))
        results["smoothing_throughput"] = log.run(
            "smoothing throughput benchmark", smoothing_throughput, fold_graphs[0], n_queries=q0.size,
            n_candidates=min(cfg.n_candidates, tools.size))

    results["device"] = f"{jax.devices()[0].platform} x{jax.device_count()}"
    results["timings"] = log.timings
    results["run_key"] = run_key
    from riskrank_jax.report import write_outputs

    write_outputs(results, out_dir)
    click.echo(f"[{cfg.benchmark}] wrote {out_dir}/results.json, tables.md, lambda_sweep.png, tradeoff.png",
               err=True)
    return results


RESULTS_VERSION = 2


def _training_summary(res) -> dict:
    best = np.asarray(res.best_epoch)
    held = np.asarray(res.heldout_loss)
    return {
        "models": len(res.model_index),
        "model_index": res.model_index,
        "best_epoch": best.tolist(),
        "best_heldout_loss": [round(float(held[m, best[m]]), 6) for m in range(best.shape[0])],
    }


# ---------------------------------------------------------------------------------------------- CLI


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--benchmark", type=click.Choice(["demo", "ultratool", "sealtools", "all"]), default="demo",
              show_default=True, help="'all' runs demo, ultratool and sealtools in turn.")
@click.option("--encoder", default=None, metavar="PATH", help="Local HF-format BERT sentence encoder directory "
              "(default: the embedded all-MiniLM-L6-v2).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Root of the real benchmarks (default: $RISKRANK_DATA, then ../shared/datasets).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Results root (default: experiments/results).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Embedding cache directory.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Checkpoint root (default: checkpoints/).")
@click.option("--seeds", type=int, multiple=True, default=(42, 123, 777), show_default=True,
              help="Repeat the option for several seeds, or give them space-separated after one --seeds.")
@click.option("--lambdas", type=float, multiple=True, default=(0.0, 0.05, 0.1, 0.2), show_default=True)
@click.option("--alpha", type=float, default=None, help="Smoothing α (default: 0.2 UltraTool/demo, 0.02 Seal-Tools).")
@click.option("--no-extras", is_flag=True, help="Skip the λ-aware, core_plus and zero-shot variants.")
@click.option("--no-bench", is_flag=True, help="Skip the smoothing-throughput benchmark.")
@click.option("--force", is_flag=True, help="Recompute results even when results.json is up to date.")
def main(benchmark, encoder, data_dir, out_dir, cache_dir, checkpoint_dir, seeds, lambdas, alpha, no_extras,
         no_bench, force):
    """Reproduce the paper's tables (and the beyond-paper variants) in one run.

    Embeds every text once (cached), trains every model of a variant in one vmapped program (checkpoints
    reused), builds the ToolGraph(s) and evaluates all variants, λ values and seeds; writes results.json,
    tables.md and figures under experiments/results/<benchmark>/ and prints the main table.
    """
    from riskrank_jax.paths import REPO_ROOT, default_checkpoint_dir

    seeds, lambdas = tuple(seeds), tuple(lambdas)
    if len(set(seeds)) != len(seeds) or not seeds:
        raise click.BadParameter("seeds must be distinct and non-empty", param_hint="--seeds")
    out_root = Path(out_dir).resolve() if out_dir else REPO_ROOT / "experiments" / "results"
    ckpt_root = Path(checkpoint_dir).resolve() if checkpoint_dir else default_checkpoint_dir()
    names = ["demo", "ultratool", "sealtools"] if benchmark == "all" else [benchmark]
    t0 = time.perf_counter()
    try:
        for name in names:
            cfg = SweepConfig(benchmark=name, seeds=tuple(seeds), lambdas=tuple(lambdas), alpha=alpha,
                              encoder=encoder, lambda_aware=not no_extras, core_plus=not no_extras,
                              zeroshot=not no_extras, smoothing_benchmark=not no_bench)
            res = run_benchmark(cfg, data_dir=data_dir, out_root=out_root, cache_dir=cache_dir,
                                ckpt_root=ckpt_root, force=force)
            from riskrank_jax.report import main_table_text

            click.echo(main_table_text(res))
    except RiskRankError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo(f"sweep finished in {time.perf_counter() - t0:.1f}s", err=True)


def run(argv=None):
    from riskrank_jax.cli import expand_multi_value_options

    argv = sys.argv[1:] if argv is None else list(argv)
    main.main(args=expand_multi_value_options(argv), prog_name="python -m riskrank_jax.sweep")


if __name__ == "__main__":
    run()
