"""The LiveMCPBench family's tables (``experiments.livemcp``): the main table printed at the end of a run, and
tables.md with every row's standard errors and costs, the sensitivity grid, the weights chosen per fold, the
transferred models, the λ and α chosen by folds over servers, and what was not run.

Why apart from the rows: what a row computes and how its number reads change for different reasons.
"""

from __future__ import annotations

from riskrank_jax.experiments.livemcp_transfer import CE_TOP

# the columns of every row, beside RVR@5 (``livemcp.list_metrics``)
METRICS = ("ndcg@5", "recall@5", "recall@10", "complete@10")


def _cell(row: dict, m: str) -> str:
    v = row.get(m)
    return v if isinstance(v, str) else f"{v:.3f}"


def table_text(results: dict) -> str:
    """The main table as aligned text (what the sweep prints)."""
    cols = (*METRICS, "rvr@5")
    lines = [f"LiveMCPBench ({results['data']['tasks_evaluated']} tasks, {results['data']['tools']} tools, "
             f"{results['data']['servers']} servers), zero-shot",
             f"{'row':30s} " + " ".join(f"{c:>12s}" for c in cols) + f" {'cost s':>8s}"]
    for name, row in results["rows"].items():
        lines.append(f"{name:30s} " + " ".join(f"{_cell(row, c):>12s}" for c in cols)
                     + f" {results['cost_s'][name]:8.1f}")
    return "\n".join(lines)


def tables_md(results: dict) -> str:
    """tables.md: the rows with their standard errors and costs, what was not run, the data notes."""
    d = results["data"]
    out = ["# LiveMCPBench — real MCP servers' tools, zero-shot\n",
           f"{d['tasks_evaluated']} of {d['tasks']} tasks (a task none of whose tools is in the pool has nothing to "
           f"retrieve: {', '.join(results['tasks_without_gold']) or 'none'}), {d['tools']} tools of {d['servers']} "
           f"servers ({d['names_on_several_servers']} names on two servers: both copies are gold). "
           f"Encoder {results['encoder']}. Mean over tasks ± standard error. {results['protocol']}.\n",
           "| row | what | NDCG@5 | Recall@5 | Recall@10 | complete@10 | RVR@5 (must confirm) | cost (s) |",
           "|---|---|---|---|---|---|---|---|"]
    for name, row in results["rows"].items():
        cells = [f"{row[m]:.3f} ± {row[m + '_se']:.3f}" for m in METRICS]
        rvr = row["rvr@5"] if isinstance(row["rvr@5"], str) else f"{row['rvr@5']:.3f}"
        what = results["row_descriptions"][name] + (" — **what `riskrank-jax rank` does**"
                                                     if name == results.get("rank_default") else "")
        out.append(f"| `{name}` | {what} | " + " | ".join(cells)
                   + f" | {rvr} | {results['cost_s'][name]:.1f} |")
    common = "; ".join(f"{k} {v:.1f} s" for k, v in results["common_cost_s"].items())
    out += ["", f"Costs are wall-clock seconds of one run on {results['device']} (they differ between runs; the "
            f"metrics do not). Common to all rows: {common}. A ranker row's cost includes embedding its queries "
            "(and their steps) without the cache, as `riskrank-jax rank` does.", ""]
    lab = results["risk_labels"]
    if lab is None:
        out.append("RVR@5: not labelled (no risk-label corpus covers these tools).")
    else:
        out.append(f"RVR@5 from the labelled corpus: {lab['tools_covered']} of {lab['tools']} tools labelled, "
                   f"{lab['must_confirm']} must be confirmed ({lab['rule']}). Caveat: {lab['caveat']}.")
    if not results.get("rank_default"):
        out += ["", "No row's config is `DEFAULT_REGISTRY_CONFIG` as this run found it: no row is marked as what "
                "`riskrank-jax rank` does."]
    name = results["sensitivity"][0]["row"] if results["sensitivity"] else results.get("rank_default")
    out += ["", f"`{name}` (the rank default less its intent stage) over λ and α on the whole pool (sensitivity; the "
            "choice is made by folds over servers, below):", "",
            "| λ | α | NDCG@5 | Recall@5 | Recall@10 | complete@10 | RVR@5 |",
            "|---|---|---|---|---|---|---|"]
    for r in results["sensitivity"]:
        rvr = r["rvr@5"] if isinstance(r["rvr@5"], str) else f"{r['rvr@5']:.3f}"
        out.append(f"| {r['lam']:g} | {r['alpha']:g} | {r['ndcg@5']:.3f} | {r['recall@5']:.3f} | "
                   f"{r['recall@10']:.3f} | {r['complete@10']:.3f} | {rvr} |")
    out += _risk_detail_md(results.get("risk_detail"))
    cv = results["cv"]
    out += ["", f"`ranker_server_steps_cv`: (server_weight, sibling_weight, step_weight) chosen per fold of "
            f"{cv['folds']} over the tasks, by NDCG@5 on the other folds' tasks, from {len(cv['grid'])} grid points: "
            + "; ".join(f"fold {i}: {c['server_weight']:g}, {c['sibling_weight']:g}, {c['step_weight']:g}"
                        for i, c in enumerate(cv["chosen_per_fold"])) + "."]
    out += _transfer_md(results.get("transfer")) + _defaults_md(results.get("defaults"))
    out += ["", "Mentions that name no tool of the pool (reported, not matched):", ""]
    out += [f"- `{u['mention']}` (task {u['task_id']})" for u in results["unmatched_mentions"]]
    out += ["", "Not run:", ""] + [f"- `{k}`: {v}" for k, v in results["not_run"].items()]
    return "\n".join(out) + "\n"


def _risk_detail_md(detail) -> list[str]:
    """Each intent row beside its row without intent and their λ = 0 row (whole pool), with the needed-tool
    metrics."""
    if not detail:
        return []
    out = ["", "With and without intent on the whole pool (Safe-RVR@5: RVR@5 over the tasks that need no must-confirm "
           "tool; NeedRisk-Hit@5 / NeedRisk-Recall@10: over the tasks that need one, whether one is in the top 5 / the "
           "share of them in the top 10):", "",
           "| row | NDCG@5 | Recall@10 | complete@10 | RVR@5 | Safe-RVR@5 | NeedRisk-Hit@5 | NeedRisk-Recall@10 |",
           "|---|---|---|---|---|---|---|---|"]
    for name, m in detail.items():
        out.append(f"| `{name}` | {m['ndcg@5']:.3f} | {m['recall@10']:.3f} | {m['complete@10']:.3f} | "
                   f"{m['rvr@5']:.4f} | {m['safe_rvr@5']:.4f} | {m['needrisk_hit@5']:.3f} | "
                   f"{m['needrisk_recall@10']:.3f} |")
    m = next(iter(detail.values()))
    out += ["", f"({m['tasks']} tasks, {m['tasks_needing_confirm']} of them need a must-confirm tool.)"]
    return out


def _transfer_md(info) -> list[str]:
    if not info:
        return []
    t, out = info["tuned_encoder"], ["", "Models trained on Seal-Tools' training queries, applied without LiveMCPBench "
                                     "training (`experiments.livemcp_transfer`; trained once, then loaded from the "
                                     "checkpoints):", ""]
    out.append(f"- tuned encoder: top {t['config']['layers']} layers, {t['train_queries']} training queries "
               f"({t['heldout_queries']} held out), {t['steps']} steps, the epoch with the best held-out NDCG@5 of the "
               f"tuned cosine (epoch {t['epoch']}: " + ", ".join(f"{x:.3f}" for x in t["heldout_ndcg@5_by_epoch"])
               + f"; the frozen hybrid {t['heldout_ndcg@5_frozen_hybrid']:.3f}); training {t['trained_s']:.0f} s "
               f"(once), embedding the registry with it {t['embed_registry_s']:.1f} s.")
    c = info.get("cross_encoder")
    if c:
        gates = ", ".join(f"γ {g}: {v:.3f}" for g, v in c["heldout_ndcg@5_by_gate"].items())
        out.append(f"- cross-encoder: all-MiniLM-L6-v2 with a new one-logit head, {c['train_queries']} training "
                   f"queries, {c['steps']} steps ({c['train_pairs']} pairs); gate chosen on {c['heldout_queries']} "
                   f"held-out Seal-Tools queries ({gates}) → γ = {c['gate']:g}; training "
                   f"{c['trained_s'] or 0:.0f} s (once), scoring the {CE_TOP} candidates of the 94 tasks "
                   f"{c['scored_s']:.0f} s (once; saved beside the run).")
    return out


def _defaults_md(d) -> list[str]:
    if not d:
        return []
    out = ["", f"λ and α chosen by folds over servers (`experiments.livemcp_defaults`): {d['folds']} folds of "
           f"{', '.join(map(str, d['servers_per_fold']))} servers; per fold the rule chooses on the other folds' "
           f"servers (one registry) and is scored on the fold's own (another registry). Rule: the largest λ whose "
           f"NDCG@5 is within {d['tolerance']:g} of the best at λ = 0, Recall@10 within {d['tolerance']:g} of its "
           "α's λ = 0 value, and NeedRisk-Hit@5 / NeedRisk-Recall@10 (needed must-confirm tools in the top 5 / 10) "
           "not below it; then the best α at that λ.", "",
           "| fold | chosen λ | chosen α | choosing NDCG@5 | scoring NDCG@5 | scoring complete@10 | scoring tasks |",
           "|---|---|---|---|---|---|---|"]
    for c in d["chosen_per_fold"]:
        out.append(f"| {c['fold']} | {c['lam']:g} | {c['alpha']:g} | {c['choosing']['ndcg@5']:.3f} | "
                   f"{c['scoring']['ndcg@5']:.3f} | {c['scoring']['complete@10']:.3f} | {c['scoring']['tasks']} |")
    sc, cur = d["scored_chosen"], d["scored_current"]
    out += ["", f"On the scoring folds ({sc['tasks']} task-registry pairs, {sc['tasks_needing_confirm']} needing a "
            f"must-confirm tool): each fold's choice NDCG@5 {sc['ndcg@5']:.3f}, complete@10 {sc['complete@10']:.3f}, "
            f"Safe-RVR@5 {sc['safe_rvr@5']:.3f}; the shipped default (λ {d['current']['lam']:g}, α "
            f"{d['current']['alpha']:g}) {cur['ndcg@5']:.3f}, {cur['complete@10']:.3f}, {cur['safe_rvr@5']:.3f}. The "
            f"rule over all scoring folds at once picks λ {d['rule_on_all_scoring_folds']['lam']:g}, α "
            f"{d['rule_on_all_scoring_folds']['alpha']:g}.", "",
            "Sensitivity (pooled over the scoring folds):", "",
            "| λ | α | NDCG@5 | Recall@10 | complete@10 | RVR@5 | Safe-RVR@5 | NeedRisk-Hit@5 | NeedRisk-Recall@10 |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in d["sensitivity"]:
        out.append(f"| {r['lam']:g} | {r['alpha']:g} | {r['ndcg@5']:.3f} | {r['recall@10']:.3f} | "
                   f"{r['complete@10']:.3f} | {r['rvr@5']:.3f} | {r['safe_rvr@5']:.3f} | {r['needrisk_hit@5']:.3f} | "
                   f"{r['needrisk_recall@10']:.3f} |")
    return out + _intent_md(d.get("intent"))


def _setting(c: dict) -> str:
    """"off" or "strength 4, specific 1, agreement 0" of an intent setting."""
    if not c.get("intent"):
        return "off"
    return (f"strength {c['intent_strength']:g}, specific {c['intent_specific']:g}, agreement "
            f"{c['intent_agreement']:g}")


def _intent_md(i) -> list[str]:
    if not i:
        return []
    out = ["", f"The intent stage chosen by the same folds over servers, at λ {i['lam']:g}, α {i['alpha']:g} "
           f"(`livemcp_defaults.choose_intent`): intent off, or on with strength ∈ "
           f"{{{', '.join(f'{x:g}' for x in i['strengths'])}}} × specific ∈ "
           f"{{{', '.join(f'{x:g}' for x in i['specifics'])}}} × agreement ∈ "
           f"{{{', '.join(f'{x:g}' for x in i['agreements'])}}}, relief {i['relief']:g}. Rule: {i['rule']}.", "",
           "| fold | chosen intent | choosing NDCG@5 | choosing RVR@5 | scoring NDCG@5 | scoring RVR@5 | "
           "scoring tasks |", "|---|---|---|---|---|---|---|"]
    for c in i["chosen_per_fold"]:
        out.append(f"| {c['fold']} | {_setting(c)} | {c['choosing']['ndcg@5']:.3f} | {c['choosing']['rvr@5']:.4f} | "
                   f"{c['scoring']['ndcg@5']:.3f} | {c['scoring']['rvr@5']:.4f} | {c['scoring']['tasks']} |")
    keys = ("ndcg@5", "recall@10", "complete@10", "rvr@5", "safe_rvr@5", "needrisk_hit@5", "needrisk_recall@10")
    head = ("| setting | NDCG@5 | Recall@10 | complete@10 | RVR@5 | Safe-RVR@5 | NeedRisk-Hit@5 | "
            "NeedRisk-Recall@10 |")

    def line(label, m):
        cells = (f"{m[k]:.4f}" if k.endswith("rvr@5") else f"{m[k]:.3f}" for k in keys)
        return f"| {label} | " + " | ".join(cells) + " |"
    out += ["", f"Pooled over the scoring folds ({i['scored_lam0']['tasks']} task-registry pairs); the rule on all of "
            f"them at once picks {_setting(i['rule_on_all_scoring_folds'])}:", "", head,
            "|---|---|---|---|---|---|---|---|---|",
            line(f"λ = 0 (α {i['alpha']:g})", i["scored_lam0"]), line("each fold's choice", i["scored_chosen"])]
    out += [line(_setting(r), r) for r in i["sensitivity"]]
    return out


__all__ = ["table_text", "tables_md", "METRICS"]
