"""Why a Ranker returned what it did for one query: how each stage moved each returned tool, which risky
tools the risk penalty (or the rule filter) held back, and, with the intent stage, what the request was read as
asking and which of each held-back tool's effects it did not ask for.

    report = explain_query(ranker, "delete the branch feature-x", k=5)     # a JSON-able dict
    print(to_text(report))
    hits, held, request = search_explained(ranker, "what did people say in #ops", 5)   # one walk (search seams)

Stages (see `riskrank_jax.rank.ranker`): first stage (cosine, BM25 or their hybrid fusion) -> head f_rel (when
the ranker has one) -> intent (the exposure weight of λ·risk) -> −λ·risk -> graph smoothing -> rule filter.
"Held back" = tools in the top-k at λ = 0 with everything else unchanged, but not in the top-k now, that are
risky (r ≥ 3) or, with intent, have an effect the request did not ask for. Their reason is in the gateway's own
words: with intent ``retrieve.intent.held_back_reason`` ("held back: sends to others; the request only reads"),
then the risk level and the rank on relevance alone; "held_by" says whether the intent hold-back ranked the tool
last (``RankConfig.intent_hold_back``) or the (intent-weighted) risk penalty moved it down.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from riskrank_jax.rank import stages
from riskrank_jax.rank.ranker import check_queries
from riskrank_jax.rank.tool_hits import make_hits
from riskrank_jax.retrieve import intent
from riskrank_jax.retrieve.steps import request_steps
from riskrank_jax.scoring import is_risky, rank_order

HOLD_BACK, PENALTY = "intent hold-back", "risk penalty"  # what held a tool back ("held_by")


def _positions(scores) -> np.ndarray:
    """int [N]: 1-based position of each tool when sorted by descending score (ties: lower index first)."""
    order = np.asarray(rank_order(np.asarray(scores)))
    pos = np.empty_like(order)
    pos[order] = np.arange(1, order.size + 1)
    return pos


def _ranked_positions(ranker, q_emb, query) -> np.ndarray:
    """int [N]: 1-based final position of each tool (after the rule filter, when enabled)."""
    full = ranker.rank(q_emb, k=ranker.size, q_texts=[query])[0]
    pos = np.empty_like(full)
    pos[full] = np.arange(1, full.size + 1)
    return pos


def _risky_not_in(ranker, at_zero, ids) -> list[tuple[int, int]]:
    """(tool id, 1-based rank at λ = 0) of each risky tool (r ≥ 3) of ``at_zero`` [k] that ``ids`` lacks."""
    kept = set(np.asarray(ids).tolist())
    return [(int(t), j + 1) for j, t in enumerate(np.asarray(at_zero))
            if int(t) not in kept and is_risky(int(ranker.risk_levels[t]))]


def risky_held_back(ranker, query, k, ids, q_emb=None) -> list[tuple[int, int]]:
    """(tool id, 1-based rank at λ = 0) of each risky tool (r ≥ 3) in the top k at λ = 0, everything else
    unchanged, that is not among ``ids`` (the top k now). q_emb [1, d]: the query already embedded."""
    q_emb = ranker.encode_queries([query]) if q_emb is None else q_emb
    zero = dataclasses.replace(ranker.config, lam=0.0)  # the same prepared inputs, ranked at λ = 0
    at_zero = stages.ranked(ranker.prepared, zero, q_emb, [query], k, ranker.encoder)[0]
    return _risky_not_in(ranker, at_zero, ids)


def request_view(needs) -> dict | None:
    """What request 0 of ``needs`` (``retrieve.intent.RequestNeeds``; None: no intent stage) was read as asking:
    {"asks": "the request only reads" | "the request asks to delete, send to others", "effects": {effect: {"need",
    "source"}}}; None without intent."""
    return None if needs is None else {"asks": needs.summary(0), "effects": needs.row(0)}


def _held_candidates(ranker, at_zero, ids, needs) -> list[tuple[int, int, str | None]]:
    """(tool id, 1-based rank at λ = 0, the intent reason or None) of each tool of ``at_zero`` [k] that ``ids``
    lacks and that is risky (r ≥ 3) or has an effect the request did not ask for (``needs``; None: no intent)."""
    kept, out = set(np.asarray(ids).tolist()), []
    for j, t in enumerate(np.asarray(at_zero).tolist()):
        if t in kept:
            continue
        effects = ranker.prepared.effects[t]
        unasked = needs is not None and bool(intent.unasked_effects(needs, 0, effects))
        if is_risky(int(ranker.risk_levels[t])) or unasked:
            out.append((int(t), j + 1, None if needs is None else intent.held_back_reason(needs, 0, effects)))
    return out


def _reason(ranker, t: int, rank_at_zero: int, k: int, why: str | None, held_by: str) -> str:
    """The gateway's words for one held-back tool: the intent reason (when the config has intent), its risk level
    and source, its rank on relevance alone, what moved it, how to get it back."""
    lvl, src = int(ranker.risk_levels[t]), ranker.risk_source[t]
    moved = ("ranked last by the intent hold-back; ask for what it does in the request to get it back"
             if held_by == HOLD_BACK else
             f"below the top {k} once the risk penalty is applied; name it in the request to get it back")
    return (f"{why}; " if why else "") + f"risk level {lvl} ({src}): #{rank_at_zero} on relevance alone, {moved}"


def search_explained(ranker, query: str, k: int) -> tuple[list, list[dict], dict | None]:
    """(hits, held back, request) for one request: ``rank_queries``' ToolHits; per tool held back (in the top k
    at λ = 0, not now; risky, or with an effect the request did not ask for) {"index", "name", "risk_level",
    "risk_source", "rank_at_lambda_0", "held_by", "reason"}; and what the request was read as asking
    (``request_view``; None without intent). One walk down the stages (``stages.walk``, also at λ = 0). What a
    search seam (the gateway, the framework adapters) returns."""
    check_queries([query])
    k = ranker.checked_k(k)
    w = stages.walk(ranker.prepared, ranker.config, ranker.encode_queries([query]), [query], k, ranker.encoder,
                    also_at_lambdas=(0.0,))
    hits = make_hits(w.ids, w.total, w.relevance, ranker.tool_names, ranker.risk_levels, ranker.risk_source,
                     None)[0]
    needs = None if w.intent is None else w.intent.needs
    held = []
    for t, rank_at_zero, why in _held_candidates(ranker, w.more[0][0], w.ids[0], needs):
        by = HOLD_BACK if w.intent is not None and w.intent.held[0, t] else PENALTY
        held.append({"index": t, "name": ranker.tool_names[t], "risk_level": int(ranker.risk_levels[t]),
                     "risk_source": ranker.risk_source[t], "rank_at_lambda_0": rank_at_zero, "held_by": by,
                     "reason": _reason(ranker, t, rank_at_zero, k, why, by)})
    return hits, held, request_view(needs)


def search_with_held_back(ranker, query: str, k: int) -> tuple[list, list[dict]]:
    """(hits, held back) of ``search_explained``, without what the request was read as asking."""
    hits, held, _ = search_explained(ranker, query, k)
    return hits, held


def _held_back(ranker, q_emb, query, k, ids, parts, final_pos, before_rule, needs, held) -> list[dict]:
    zero = dataclasses.replace(ranker.config, lam=0.0)  # the same prepared inputs, ranked at λ = 0
    at_zero = stages.ranked(ranker.prepared, zero, q_emb, [query], k, ranker.encoder)[0]
    out = []
    for t, rank_at_zero, reason in _held_candidates(ranker, at_zero, list(ids), needs):
        by = HOLD_BACK if held is not None and held[t] else PENALTY
        pen = float(parts.risk_penalty[t]) - (intent.HOLD_OFFSET if by == HOLD_BACK else 0.0)  # λ·risk·w alone
        if by == HOLD_BACK:
            why = f"the intent hold-back ranked it last (#{int(before_rule[t])}; the request asks for no change)"
        elif before_rule[t] > k:
            why = f"−λ·risk = {-pen:+.3f} moved it below the top {k} (to #{int(before_rule[t])} before any filter)"
        else:
            why = f"the rule filter deferred it (#{int(before_rule[t])} by score, #{int(final_pos[t])} after)"
        out.append({"name": ranker.tool_names[t], "risk_level": int(ranker.risk_levels[t]),
                    "risk_source": ranker.risk_source[t], "rank_at_lambda_0": rank_at_zero, "rank_now": int(final_pos[t]),
                    "risk_penalty": -pen, "held_by": by, "why": why, "intent": reason,
                    "reason": _reason(ranker, t, rank_at_zero, k, reason, by)})
    return out


def explain_query(ranker, query: str, k: int | None = None) -> dict:
    """{"query", "config", "request": what the request was read as asking (``request_view``; None without
    intent), "tools": per returned tool the stages, "held_back": the tools held back and why}."""
    check_queries([query])
    k = ranker.config.k if k is None else int(k)
    q_emb = ranker.encode_queries([query])
    first = ranker.first_stage_scores(q_emb, [query])  # [1, N], after the request stages
    c, p = ranker.config, ranker.prepared
    it = stages.intent_stage(p, c, [query], first)
    needs, held = (None, None) if it is None else (it.needs, np.asarray(it.held)[0])
    first = first[0]
    parts = ranker.scores(q_emb, [query])
    parts = parts._make(np.asarray(x)[0] for x in parts)  # each [N]
    ids = ranker.rank(q_emb, k=k, q_texts=[query])[0]
    first_pos, before_rule = _positions(first), _positions(parts.total)
    final_pos = _ranked_positions(ranker, q_emb, query)
    head = ranker.params is not None
    tools = []
    for j, t in enumerate(ids):
        row = {"rank": j + 1, "name": ranker.tool_names[t], "first_stage_rank": int(first_pos[t]),
               "first_stage_score": float(first[t]), "head_relevance": float(parts.relevance[t]) if head else None,
               "risk_penalty": -float(parts.risk_penalty[t]), "graph": float(parts.graph[t]),
               "names": float(parts.names[t]),
               "score": float(parts.total[t]), "rank_before_rule_filter": int(before_rule[t]),
               "risk_level": int(ranker.risk_levels[t]), "risk_source": ranker.risk_source[t]}
        tools.append(row)
    return {"query": query, "k": k,
            "config": {"lambda": c.lam, "alpha": c.alpha, "first_stage": c.first_stage, "head": head,
                       "rule_filter": c.rule_filter, **_request_stages(ranker, query), "names": c.name_evidence,
                       "intent": c.intent,
                       "intent_hold_back": c.intent_hold_back},
            "request": request_view(needs), "tools": tools,
            "held_back": _held_back(ranker, q_emb, query, k, ids.tolist(), parts, final_pos, before_rule, needs,
                                    held)}


def _request_stages(ranker, query: str) -> dict:
    """{"server_context": whether the stage acts (on, and the ranker knows the tools' servers), "steps": the
    request's steps when the multi-step stage is on (empty: one step, or the stage is off)}."""
    c = ranker.config
    return {"server_context": bool(c.server_context and ranker.tool_server is not None),
            "steps": list(request_steps(query, c.max_steps)) if c.multi_step else []}


def to_text(report: dict) -> str:
    """A readable table of `explain_query`'s report."""
    c = report["config"]
    stage = "cosine" if c["first_stage"] == "none" else c["first_stage"]
    lines = [f"query: {report['query']}",
             f"  λ = {c['lambda']}, α = {c['alpha']}, first stage {stage}, "
             f"{'trained head' if c['head'] else 'zero-shot (no head)'}, rule filter {'on' if c['rule_filter'] else 'off'}",
             *([f"  request stages: {'server context' if c.get('server_context') else ''}"
                + ("; " if c.get("server_context") and c.get("steps") else "")
                + (f"steps {' | '.join(c['steps'])}" if c.get("steps") else "")]
               if c.get("server_context") or c.get("steps") else []),
             f"  {'#':>2}  {'tool':<24} {'first stage':>15} " + (f"{'head':>7} " if c["head"] else "")
             + f"{'−λ·risk':>8} {'graph':>7} " + (f"{'names':>7} " if c.get("names") else "")
             + f"{'final':>7}  {'rule':>7}  risk"]
    for r in report["tools"]:
        rule = "-" if not c["rule_filter"] else f"#{r['rank_before_rule_filter']}→#{r['rank']}"
        lines.append(f"  {r['rank']:>2}  {r['name']:<24} {'#' + str(r['first_stage_rank']):>5} {r['first_stage_score']:>9.3f} "
                     + (f"{r['head_relevance']:>7.3f} " if c["head"] else "")
                     + f"{r['risk_penalty']:>+8.3f} {r['graph']:>+7.3f} "
                     + (f"{r['names']:>+7.3f} " if c.get("names") else "") + f"{r['score']:>7.3f}  {rule:>7}  "
                     f"{r['risk_level']} ({r['risk_source']})")
    held, request = report["held_back"], report.get("request")
    if request:
        asked = [f"{e} {v['need']:.2f} ({v['source']})" for e, v in request["effects"].items() if v["need"] >= 0.05]
        lines.insert(2, f"  intent: {request['asks']}" + (f"; {', '.join(asked)}" if asked else "")
                     + (f"; hold-back {c['intent_hold_back']}" if c.get("intent_hold_back") else ""))
    lines.append(f"  held back (in the top {report['k']} at λ = 0, not now):" + ("" if held else " none"))
    for h in held:
        lines.append(f"    {h['name']} (risk {h['risk_level']}, {h['risk_source']}): #{h['rank_at_lambda_0']} at "
                     f"λ = 0, now #{h['rank_now']}; {h['why']}")
        if h.get("intent"):
            lines.append(f"      {h['intent']}")
    return "\n".join(lines)


__all__ = ["explain_query", "to_text", "search_explained", "search_with_held_back", "request_view",
           "risky_held_back"]
