"""Rankings and per-query metrics of declared variants on one test split, every seed (and λ) at once.

    ev = SplitEvaluation(inputs, runs, graphs, lambdas=(0, .05, .1, .2), main_lambda=0.1, alpha=0.2, k=5)
    pq, grid_pq = ev.metrics(variant)   # {metric: [S, Q]}, and {λ: {metric: [S, Q]}} for λ-sweep variants

A variant's scores flow through the pipeline stages the ``Ranker`` uses (``scoring.penalise``,
``rank.stacked.smooth_per_fold``, candidates, ``scoring.rank_order``, the rule filter), with the seeds (and,
for λ-sweep variants, the λ grid) as leading axes. Shared intermediate results (a run's head scores, a
penalised grid, a pre-filter ranking) are computed once per split; variants with the same ``spec()``
share their metrics.

Memory and compilation: ``evaluate_split`` (the sweep) runs a SplitEvaluation per chunk of queries
(``map_query_chunks``), sized by ``queries_per_chunk`` so that the memoised grids of one chunk stay within
the memory budget, and every stage after scoring (smoothing, ranking, rule filter, metrics) runs per
[Q, N] slice of the λ / seed axes (``per_slice``); with chunks padded to a multiple of ``CHUNK_STEP`` each
jitted stage compiles for one shape. Per-query results do not depend on the chunking.

Why seeds and λ as leading axes: one call scores a whole grid, and shared intermediates are computed once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from riskrank_jax import metrics
from riskrank_jax.graph import smoothing
from riskrank_jax.graph.tool_graph import with_edge_types
from riskrank_jax.model import rerank
from riskrank_jax.rank import stacked
from riskrank_jax.rank.rule_filter import RuleFilterCaps
from riskrank_jax.rank.ranker import RankConfig
from riskrank_jax.retrieve import baselines, first_stage, intent
from riskrank_jax.retrieve.hybrid import fuse
from riskrank_jax.runtime.memory import balanced_step, units_per_step
from riskrank_jax.scoring import RISK_THRESHOLD, is_risky, penalise, rank_order_host, top_order

STRESS_TOP = 10  # Table 7 looks at the dense top-10 ...
STRESS_MIN_RISKY = 2  # ... for at least this many risky tools
CHUNK_STEP = 64  # query chunks (and each fold's queries) are padded to a multiple of this, so shapes repeat


def _without_rule(v):
    return dataclasses.replace(v, rule_filter=False)


def per_slice(fn, *arrays):
    """``fn`` over the [Q, X] slices of arrays [..., Q, X] (leading axes broadcast), stacked back to
    [..., Q, Y]: every jitted stage sees one shape per query chunk, whatever the variant's λ / seed axes.
    On the CPU backend the slicing and stacking run in numpy (outputs are numpy), so no eager slice, reshape or
    stack program is compiled for each shape (docs/performance.md, "Evaluation")."""
    xp = np if host_sorts() else jnp
    arrays = [xp.asarray(a) for a in arrays]
    lead = xp.broadcast_shapes(*(a.shape[:-2] for a in arrays))
    flat = [xp.broadcast_to(a, lead + a.shape[-2:]).reshape((-1,) + a.shape[-2:]) for a in arrays]
    outs = [fn(*(f[i] for f in flat)) for i in range(flat[0].shape[0])]
    return jax.tree.map(lambda *o: xp.stack([xp.asarray(x) for x in o]).reshape(lead + o[0].shape), *outs)


def host_sorts() -> bool:
    """Whether rankings are sorted by numpy on the host (the CPU backend, where XLA's sort of (score, index)
    pairs is much slower than ``rank_order_host``) rather than by XLA (accelerators)."""
    return jax.default_backend() == "cpu"


def host_per_slice(fn, x, *shared):
    """``per_slice`` on the host: ``fn(slice, *shared)`` over the [Q, X] slices of the numpy array x [..., Q, X],
    one slice at a time (so a slice's temporaries, e.g. sort keys, are all that is held), stacked to [..., Q, Y]."""
    x = np.asarray(x)
    outs = [fn(xs, *shared) for xs in x.reshape((-1,) + x.shape[-2:])]
    return np.stack(outs).reshape(x.shape[:-1] + outs[0].shape[-1:])


def rank_slices(scores):
    """``rank_order`` of scores [..., Q, N]: by numpy on the CPU backend, else one jitted call per [Q, N]
    slice. The same permutation either way."""
    if host_sorts():
        return host_per_slice(rank_order_host, scores)
    return per_slice(baselines.rank_full, scores)


def full_rankings(candidate_ranking, base_ranking):
    """``first_stage.candidate_full_ranking`` of candidate rankings [..., Q, C] over a base ranking [Q, N]."""
    if host_sorts():
        return host_per_slice(baselines.candidate_full_ranking_host, candidate_ranking, np.asarray(base_ranking))
    return per_slice(lambda c: first_stage.candidate_full_ranking(c, base_ranking), candidate_ranking)


@dataclass(frozen=True, eq=False)
class SplitInputs:
    """One split's queries and the registry, as arrays. q_emb [Q, d], fold int [Q], gold [Q, G]; t_emb
    [N, d], risk_levels / perm_level int [N], tool_texts / query_texts for BM25; named_t_emb [N, d] and
    named_tool_texts: the same for tool texts "<name words>: <description>"."""

    q_emb: np.ndarray
    fold: np.ndarray
    gold: np.ndarray
    query_texts: tuple[str, ...]
    t_emb: np.ndarray
    risk_levels: np.ndarray
    perm_level: np.ndarray
    tool_texts: tuple[str, ...]
    named_t_emb: np.ndarray | None = None
    named_tool_texts: tuple[str, ...] | None = None
    first: dict | None = None  # {("dense" | "bm25", tool text): [Q, N]} computed once (``with_first_stages``)

    def tools(self, text: str):
        """(embeddings, texts) of the tools for a variant's ``tool_text``."""
        return (self.t_emb, self.tool_texts) if text == "description" else (self.named_t_emb, self.named_tool_texts)


@dataclass(frozen=True)
class EvalSettings:
    lambdas: tuple[float, ...]
    main_lambda: float
    alpha: float
    k: int
    n_candidates: int
    n_seeds: int
    memory_budget: int
    rule: RuleFilterCaps = RuleFilterCaps()
    # the *_intent rows' (strength, relief, agreement weight, specific): retrieve.intent.exposure_weight,
    # request_needs
    intent: tuple[float, float, float, float] = (RankConfig.intent_strength, RankConfig.intent_relief,
                                                 RankConfig.intent_agreement, RankConfig.intent_specific)


def fold_model_scores(params, q_emb, t_emb, *, n_seeds: int, test_fold, memory_budget: int):
    """``rank.stacked.model_scores`` (rel [S, Q, N], risk [S, Q|1, N]), each fold's queries padded to a multiple of
    ``CHUNK_STEP`` so that every fold and query chunk reuses one compiled shape."""
    n_folds = jax.tree.leaves(params)[0].shape[0] // n_seeds
    if n_folds == 1:
        return stacked.model_scores(params, q_emb, t_emb, n_seeds=n_seeds, test_fold=test_fold, memory_budget=memory_budget)
    fold, q_emb = np.asarray(test_fold), np.asarray(q_emb)
    params = jax.tree.map(np.asarray, params)  # sliced per fold on the host: no eager slice to compile
    rel = np.zeros((n_seeds, q_emb.shape[0], t_emb.shape[0]), np.float32)
    risk = np.zeros_like(rel)
    for f in range(n_folds):
        idx = np.flatnonzero(fold == f)
        if idx.size:
            rows = np.resize(idx, -(-idx.size // CHUNK_STEP) * CHUNK_STEP)
            r, k = stacked.model_scores(jax.tree.map(lambda x: x[f::n_folds], params), q_emb[rows], t_emb,
                                  n_seeds=n_seeds, test_fold=np.zeros(rows.size, np.int32), memory_budget=memory_budget)
            rel[:, idx] = np.asarray(r)[:, :idx.size]
            risk[:, idx] = np.asarray(k)
    return jnp.asarray(rel), jnp.asarray(risk)


class SplitEvaluation:
    """Memoised stages of every variant on one split. ``runs``: {run name: TrainResult | risk params}."""

    def __init__(self, inputs: SplitInputs, runs: dict, graphs: dict, settings: EvalSettings,
                 full_graphs: dict | None = None):
        self.x, self.runs, self.graphs, self.s = inputs, runs, graphs, settings
        self.full_graphs = full_graphs  # ``full_pool_graphs`` of the split's variants (None: built per variant)
        self._memo: dict = {}

    def _cached(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    # ------------------------------------------------------------------------------------ first stages
    def dense(self, text: str = "description"):
        """Cosine [Q, N]."""
        if self.x.first and ("dense", text) in self.x.first:
            return self._cached(("dense", text), lambda: jnp.asarray(self.x.first["dense", text]))
        return self._cached(("dense", text), lambda: first_stage.dense_scores(
            jnp.asarray(self.x.q_emb), jnp.asarray(self.x.tools(text)[0])))

    def dense_ranking(self):
        return self._cached("dense_rank", lambda: rank_slices(self.dense()))

    def bm25(self, text: str = "description"):
        if self.x.first and ("bm25", text) in self.x.first:
            return self._cached(("bm25", text), lambda: jnp.asarray(self.x.first["bm25", text]))
        return self._cached(("bm25", text), lambda: jnp.asarray(
            baselines.bm25_scores(list(self.x.tools(text)[1]), list(self.x.query_texts))))

    def hybrid(self, text: str = "description"):
        """The hybrid first stage [Q, N], each query with the fusion weight chosen on its fold's training queries."""
        w = jnp.asarray(self.runs["hybrid_weights"][text], jnp.float32)[jnp.asarray(self.x.fold)][:, None]
        return self._cached(("hybrid", text), lambda: fuse(self.dense(text), self.bm25(text), w))

    def first_stage(self, v):
        """Candidate source and base order of a candidate-mode variant: [Q, N] scores."""
        return self.dense() if v.first_stage == "dense" else self.hybrid(v.tool_text)

    def first_stage_ranking(self, v):
        return self.dense_ranking() if v.first_stage == "dense" else self._cached(
            ("hybrid_rank", v.tool_text), lambda: rank_slices(self.hybrid(v.tool_text)))

    def reranked(self, text: str):
        """The correction reranker's gated scores [S, Q, N] (each query under its fold's models)."""
        t_emb, _ = self.x.tools(text)
        return self._cached(("rerank", text), lambda: rerank.rerank_scores(
            self.runs["rerank"], self.x.q_emb, t_emb, self.bm25(text), n_seeds=self.s.n_seeds,
            test_fold=self.x.fold))

    def precomputed(self, name: str, text: str = "named"):
        """Scores computed for the whole split before it was cut into query chunks, [S, Q, N]: the tuned-encoder
        relevance "ft_hybrid" and risk "ft_risk" (``experiments.tuned.with_tuned``), the cross-encoder's
        "ce_rerank" and a baseline reranker's "reranker:<name>" (``experiments.cross``); stored [Q, S, N]."""
        return self._cached(("precomputed", name, text),
                            lambda: jnp.swapaxes(jnp.asarray(self.x.first[name, text]), 0, 1))

    def head(self, run: str, n_seeds: int):
        """(rel [S', Q, N], risk [S', Q|1, N]) of a trained run, each query under its fold's models."""
        return self._cached(("head", run), lambda: fold_model_scores(
            self.runs[run].params, self.x.q_emb, self.x.t_emb, n_seeds=n_seeds, test_fold=self.x.fold,
            memory_budget=self.s.memory_budget))

    # ------------------------------------------------------------------------------------ scores
    def main_lambda(self, v) -> float:
        return self.s.main_lambda if v.lam is None else v.lam

    def sweep_lambdas(self, v) -> tuple[float, ...]:
        return tuple(self.s.lambdas) if v.lambdas is None else tuple(v.lambdas)

    def grid_lambdas(self, v) -> tuple[float, ...]:
        lams = self.sweep_lambdas(v)
        if not v.trained_at_lambda and self.main_lambda(v) not in lams:
            lams = lams + (self.main_lambda(v),)
        return lams

    def _relevance_and_risk(self, v):
        if v.relevance == "dense":
            rel = self.dense(v.tool_text)[None]
        elif v.relevance == "bm25":
            rel = self.bm25(v.tool_text)[None]
        elif v.relevance == "hybrid":
            rel = self.hybrid(v.tool_text)[None]
        elif v.relevance == "rerank":
            rel = self.reranked(v.tool_text)
        elif v.relevance in ("ft_hybrid", "ce_rerank"):
            rel = self.precomputed(v.relevance)
        elif v.relevance == "reranker":
            rel = self.precomputed(f"reranker:{v.reranker}", "description")
        else:
            rel, head_risk = self.head(v.train, self.s.n_seeds)
        if v.risk == "head":
            _, risk = self.head(v.train, self.s.n_seeds)
        elif v.risk == "risk_only":
            risk = self.runs["risk_only"][:, None, :]  # [S, 1, N]
        elif v.risk == "ft_risk":
            risk = self.precomputed("ft_risk")
        else:
            risk = None
        if v.intent and risk is not None:
            risk = risk * self.intent_weight(v)  # [S, Q, N]
        return rel, risk

    def intent_weight(self, v):
        """float32 [Q, N]: the exposure weight of the split's requests (``retrieve.intent.exposure_weight``): their
        needs from keywords, their fold's intent model and (with an agreement weight) the variant's first stage."""
        def build():
            strength, relief, agree_weight, specific = self.s.intent
            effects = self.runs["intent"].effects
            agree = intent.agreement(np.asarray(self.first_stage(v)), effects) if agree_weight > 0 else None
            needs = intent.request_needs(self.x.query_texts, self.x.first["intent", "learned"], agree, agree_weight)
            return intent.exposure_weight(needs.need, effects, strength, relief, specific)

        return self._cached(("intent_weight", v.first_stage, v.tool_text), build)

    def _lambda_aware_grid(self, v):
        """[L, S, Q, N]: model l (trained at λ_l) scored at λ_l."""
        n_l, n_s = len(self.s.lambdas), self.s.n_seeds
        res = self.runs[v.train]
        n_f = jax.tree.leaves(res.params)[0].shape[0] // (n_s * n_l)
        # model order is (seed, fold, λ); regroup to (λ, seed, fold) so λ·seed acts as the seed axis
        p = jax.tree.map(lambda x: np.swapaxes(np.asarray(x).reshape(n_s * n_f, n_l, *x.shape[1:]), 0, 1)
                         .reshape(n_l * n_s * n_f, *x.shape[1:]), res.params)
        rel, risk = fold_model_scores(p, self.x.q_emb, self.x.t_emb, n_seeds=n_l * n_s, test_fold=self.x.fold,
                                      memory_budget=self.s.memory_budget)
        split = lambda a: a.reshape(n_l, n_s, *a.shape[1:])  # noqa: E731
        return jax.vmap(penalise)(split(rel), split(risk), jnp.asarray(self.s.lambdas, rel.dtype))

    def scores(self, v):
        """Penalised scores: [L, S, Q, N] for λ-sweep variants (λ from ``grid_lambdas``), else [S, Q, N]."""
        key = ("scores", v.relevance, v.tool_text, v.lambdas, v.train if v.runs() else None, v.risk, v.lam,
               v.lambda_sweep, v.trained_at_lambda, v.intent)

        def build():
            if v.trained_at_lambda:
                return self._lambda_aware_grid(v)
            rel, risk = self._relevance_and_risk(v)
            if risk is None:
                return rel
            if v.lambda_sweep:
                return penalise(rel, risk, jnp.asarray(self.grid_lambdas(v)))
            return penalise(rel, risk, self.main_lambda(v))

        return self._cached(key, build)

    # ------------------------------------------------------------------------------------ rankings
    def graph_list(self, v):
        return variant_graphs(self.graphs, v)

    def full_graph(self, v):
        """(FoldGraphs, per_fold) of a full-pool graph variant (see ``full_pool_graphs``)."""
        key = (v.graph, v.edge_types)
        if self.full_graphs is None or key not in self.full_graphs:
            return self._cached(("full_graph",) + key, lambda: full_pool_graphs(self.graphs, [v])[key])
        return self.full_graphs[key]

    def _candidate_ranking(self, v, s):
        cand = first_stage.top_candidates(self.first_stage(v), c=min(self.s.n_candidates, self.x.t_emb.shape[0]))
        cs = stacked.gather_candidates(s, cand)
        if v.graph:
            cand_np, graphs = np.asarray(cand), self.graph_list(v)
            cs = per_slice(lambda c: stacked.smooth_candidates_per_fold(c, cand_np, graphs, self.x.fold, self.s.alpha), cs)
        return per_slice(lambda c: stacked.candidate_ranking(c, cand), cs)

    def _full_ranking(self, v, candidate_ranking):
        return full_rankings(candidate_ranking, self.first_stage_ranking(v))

    def _rule(self, ranking):
        caps = dataclasses.asdict(self.s.rule)
        return per_slice(lambda r: stacked.apply_rule_filter(r, self.x.risk_levels, self.x.perm_level, self.x.t_emb,
                                                             k=self.s.k, **caps), ranking)

    def ranking(self, v):
        """int32 [L, S, Q, N] (λ-sweep variants) or [S, Q, N]; baselines have S = 1."""
        key = ("ranking",) + v.spec()

        def build():
            s = self.scores(v)
            if v.candidates:
                r = self._candidate_ranking(v, s)
                return self._full_ranking(v, self._rule(r) if v.rule_filter else r)
            if v.rule_filter:
                return self._rule(self.ranking(_without_rule(v)))
            if v.graph:
                fg, per_fold = self.full_graph(v)
                fold = np.asarray(self.x.fold) if per_fold else np.zeros_like(np.asarray(self.x.fold))
                s = per_slice(lambda x: stacked.smooth_per_fold(x, fg, fold, self.s.alpha, fixed_shapes=True), s)
            return rank_slices(s)

        return self._cached(key, build)

    # ------------------------------------------------------------------------------------ metrics
    def per_query(self, ranking) -> dict[str, np.ndarray]:
        gold, risk = jnp.asarray(self.x.gold), jnp.asarray(self.x.risk_levels)
        out = per_slice(lambda r: metrics.compute_all(r, gold, risk, k=self.s.k), ranking)
        return {name: np.asarray(v) for name, v in out.items()}

    def metrics(self, v):
        """(per-query metrics {m: [S, Q]} at the main λ or None, {λ: {m: [S, Q]}} over the grid or None)."""
        def build():
            r = self.ranking(v)
            if not v.lambda_sweep:
                return self.per_query(r), None
            lams = self.grid_lambdas(v)
            grid = self.per_query(r)
            sweep = {lv: {m: x[i] for m, x in grid.items()} for i, lv in enumerate(lams)
                     if lv in self.sweep_lambdas(v)}
            if v.trained_at_lambda:
                return sweep.get(self.main_lambda(v)), sweep
            return self.per_query(r[lams.index(self.main_lambda(v))]), sweep

        return self._cached(("metrics",) + v.spec(), build)

    def release(self, remaining) -> None:
        """Forget the rankings no variant in ``remaining`` will reuse (bounds memory over a long list)."""
        keep = {("ranking",) + u.spec() for u in remaining}
        keep |= {("ranking",) + _without_rule(u).spec() for u in remaining if u.rule_filter}
        for key in [k for k in self._memo if k[0] == "ranking" and k not in keep]:
            del self._memo[key]


# ---------------------------------------------------------------------------------------------- graphs


def variant_graphs(graphs: dict, v) -> list:
    """A graph variant's ToolGraph per fold: ``graphs[v.graph]``, restricted to ``v.edge_types`` when given."""
    if v.edge_types is None:
        return graphs[v.graph]
    return [with_edge_types(g, v.edge_types) for g in graphs[v.graph]]


def graph_lists(graphs: dict, variants) -> dict:
    """{(graph, edge_types): ``variant_graphs``} of the full-pool graph variants among ``variants``."""
    out = {}
    for v in variants:
        if v.graph and not v.candidates and (v.graph, v.edge_types) not in out:
            out[v.graph, v.edge_types] = variant_graphs(graphs, v)
    return out


def full_pool_graphs(graphs: dict, variants) -> dict:
    """{(graph, edge_types): (FoldGraphs, per_fold)} for the full-pool graph variants: every graph on ONE union
    edge list with the same number of weight rows, so that with ``fixed_shapes`` the smoothing of all of them
    (and of every query chunk) runs one compiled program (a compile costs seconds; a call tens of ms).
    per_fold: whether queries use their fold's row (else row 0, a graph shared by all folds)."""
    lists = graph_lists(graphs, variants)
    if not lists:
        return {}
    union = smoothing.union_edges(list(lists.values()))
    n_rows = max(len(gl) for gl in lists.values())
    return {key: (smoothing.stack_graphs(gl, union=union, n_rows=n_rows), len(gl) > 1) for key, gl in lists.items()}


# ---------------------------------------------------------------------------------------------- query chunks


def with_first_stages(x: SplitInputs, texts=("description", "named")) -> SplitInputs:
    """``x`` with the dense cosine and BM25 scores [Q, N] of each tool text computed once for the whole split
    (query chunks slice them instead of rebuilding a BM25 index each)."""
    first = {}
    for text in texts:
        t_emb, t_texts = x.tools(text)
        if t_emb is None or t_texts is None:
            continue
        first["dense", text] = np.asarray(first_stage.dense_scores(jnp.asarray(x.q_emb), jnp.asarray(t_emb)))
        first["bm25", text] = baselines.bm25_scores(list(t_texts), list(x.query_texts))
    return dataclasses.replace(x, first=first)


def take_queries(x: SplitInputs, idx) -> SplitInputs:
    """The split restricted to queries ``idx`` (int [q]), tools unchanged."""
    idx = np.asarray(idx)
    first = {k: a[idx] for k, a in x.first.items()} if x.first else None
    return dataclasses.replace(x, q_emb=x.q_emb[idx], fold=np.asarray(x.fold)[idx], gold=np.asarray(x.gold)[idx],
                               query_texts=tuple(x.query_texts[i] for i in idx), first=first)


def rows_per_query(variants, s: EvalSettings) -> int:
    """About how many float [N] rows one query's evaluation of ``variants`` holds at once: every memoised
    score grid (λ values x seeds rows), the models' relevance and risk, the first stages, and a few copies of
    the largest grid (its ranking and the sort / smoothing / rule-filter working set)."""
    grids = {}
    for v in variants:
        n_l = (len(v.lambdas or s.lambdas) + 1) if v.lambda_sweep else 1
        grids[(v.relevance, v.tool_text, v.lambdas, v.train, v.risk, v.lam, v.lambda_sweep,
               v.trained_at_lambda, v.intent)] = n_l * s.n_seeds
    runs = {v.train for v in variants if v.train}
    return sum(grids.values()) + 4 * max(grids.values(), default=1) + 2 * s.n_seeds * len(runs) + 8


def queries_per_chunk(n_queries: int, n_tools: int, rows: int, budget: int) -> int:
    """Queries per chunk so that chunk x rows x tools x 4 bytes <= budget (at least 1): the chunks about equal,
    rounded up to a multiple of ``CHUNK_STEP`` (the last chunk is padded) unless the budget allows fewer."""
    c_max = units_per_step(4 * n_tools * rows, budget)
    step = CHUNK_STEP if c_max >= CHUNK_STEP else 1
    return balanced_step(n_queries, c_max - c_max % step, step)


def map_query_chunks(fn, x: SplitInputs, chunk: int):
    """``fn(chunk inputs)`` -> a pytree of arrays [..., q] (query axis last), over chunks of ``chunk`` queries,
    concatenated to [..., Q]. The last chunk is padded by repeating its last query (dropped after), so every
    chunk has one shape and each jitted stage compiles once."""
    n = x.q_emb.shape[0]
    outs = []
    for start in range(0, n, chunk):
        out = fn(take_queries(x, np.minimum(np.arange(start, start + chunk), n - 1)))
        keep = min(chunk, n - start)
        outs.append(jax.tree.map(lambda a, keep=keep: np.asarray(a)[..., :keep], out))
    return jax.tree.map(lambda *a: np.concatenate(a, axis=-1), *outs)


def variant_metrics(ev: SplitEvaluation, variants) -> dict:
    """{variant name: ``ev.metrics(v)``} with rankings released as soon as no later variant reuses them."""
    out = {}
    for i, v in enumerate(variants):
        out[v.name] = ev.metrics(v)
        ev.release(variants[i + 1:])
    return out


def dense_top(dense, n: int = STRESS_TOP) -> np.ndarray:
    """int32 [Q, n]: the first n tools of each query's dense ranking (what ``select_stress_queries`` reads)."""
    return np.asarray(top_order(jnp.asarray(dense), n))


def select_stress_queries(dense_ranking, gold, risk, n: int):
    """Table 7's stress queries: gold all safe (not risky) and the dense top-10 holds two or more risky tools.

    When more than n qualify, the n with the most risky tools in the dense top-10 are kept (ties: query order).
    Returns (indices, rule text).
    """
    dense_ranking = np.asarray(dense_ranking)
    g_risk = np.where(gold >= 0, risk[np.maximum(gold, 0)], 0)
    safe_gold = ~is_risky(g_risk).any(-1)
    risky_top10 = is_risky(risk[dense_ranking[:, :STRESS_TOP]]).sum(-1)
    ok = np.nonzero(safe_gold & (risky_top10 >= STRESS_MIN_RISKY))[0]
    order = ok[np.lexsort((ok, -risky_top10[ok]))]
    chosen = np.sort(order[:n])
    rule = (f"queries whose gold tools all have r <= {RISK_THRESHOLD - 1} and whose dense top-{STRESS_TOP} holds "
            f">= {STRESS_MIN_RISKY} tools with r >= {RISK_THRESHOLD} "
            f"({ok.size} qualify); the {min(n, ok.size)} with the most such tools kept, ties by query order")
    return chosen, rule





# ---------------------------------------------------------------------------------------------- reductions

RESULT_METRICS = ("ndcg@5", "ndcg@10", "sndcg@5", "mrr", "recall@10", "success@5", "rvr@5", "srr@5")
CONTEXT_METRICS = ("safe_rvr@5", "needrisk_hit@5", "rvr@5_high_risk")


def reduce_queries(pq: dict, where=None) -> dict[str, np.ndarray]:
    """Means over the query axis (last), plus the context metrics, each [...] over leading axes."""
    if where is not None:
        sel = np.zeros(pq["ndcg@5"].shape[-1], bool)
        sel[where] = True
        pq = {k: v[..., sel] for k, v in pq.items()}
    means = {k: np.asarray(v) for k, v in metrics.mean_metrics({m: pq[m] for m in RESULT_METRICS}).items()}
    ctx = {k: np.asarray(v) for k, v in metrics.context_metrics(pq).items()}
    return {**means, **ctx}


def pick(reduced: dict, keys) -> dict:
    """{metric: {"mean", "std"}} over seeds (sample std) of the chosen metrics of ``reduce_queries`` output."""
    return metrics.summarize({m: np.atleast_1d(reduced[m]) for m in keys})
__all__ = ["SplitInputs", "EvalSettings", "SplitEvaluation", "select_stress_queries", "reduce_queries", "pick",
           "RESULT_METRICS", "CONTEXT_METRICS", "with_first_stages", "take_queries", "rows_per_query",
           "queries_per_chunk", "map_query_chunks", "variant_metrics", "dense_top", "per_slice", "rank_slices",
           "full_rankings", "host_sorts", "host_per_slice", "fold_model_scores", "full_pool_graphs", "graph_lists",
           "variant_graphs",
           "CHUNK_STEP"]
