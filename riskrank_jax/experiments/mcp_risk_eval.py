"""Judging the risk model by folds over servers: the gate's metrics, per-dimension precision and recall, the
baselines, and the choice of thresholds (on training servers only).

    m = gate_metrics(allowed, must)                  # {"must_confirm_recall", "reads_allowed", ...}
    d = dimension_metrics(mut_pred, flags_pred, mutation, flags)
    th = choose_thresholds(probs, corpus_rows...)    # DimensionPolicy fields, from out-of-fold probabilities

"must confirm" is a tool labelled destructive, public sink, secret source, execution or money; its recall is
the share of them not allowed at the default policy (allow_level 3: the call asks or is refused). "reads
allowed" is the share of the other tools (reads and local reversible writes) allowed.
"""

from __future__ import annotations

import itertools
import dataclasses

import numpy as np

from riskrank_jax.registry.dimensions import DEFAULT_ALLOW_LEVEL, FLAGS, DimensionPolicy, assess_dimensions, must_confirm

TARGET_RECALL = 0.97
READ_GRID = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
DESTRUCTIVE_GRID = (0.0, 0.01, 0.02, 0.05, 0.1)
FLAG_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def gate_metrics(allowed, must) -> dict:
    """{"must_confirm_recall", "reads_allowed", "asked" (share of all tools not allowed), "must_confirm",
    "others"} for allowed bool [N] and must bool [N]."""
    allowed, must = np.asarray(allowed, bool), np.asarray(must, bool)
    n_must, n_other = int(must.sum()), int((~must).sum())
    return {"must_confirm_recall": float((~allowed[must]).mean()) if n_must else float("nan"),
            "reads_allowed": float(allowed[~must].mean()) if n_other else float("nan"),
            "asked": float((~allowed).mean()), "must_confirm": n_must, "others": n_other}


def _pr(pred, true) -> dict:
    pred, true = np.asarray(pred, bool), np.asarray(true, bool)
    tp = int((pred & true).sum())
    return {"precision": tp / int(pred.sum()) if pred.any() else float("nan"),
            "recall": tp / int(true.sum()) if true.any() else float("nan"), "support": int(true.sum())}


def dimension_metrics(mut_pred, flags_pred, mutation, flags) -> dict:
    """Precision, recall and support per dimension: "writes" (not read), "destructive", and each flag.
    mut_pred / mutation int [N] (MUTATIONS), flags_pred / flags bool [N, 5]."""
    mut_pred, mutation = np.asarray(mut_pred), np.asarray(mutation)
    out = {"writes": _pr(mut_pred > 0, mutation > 0), "destructive": _pr(mut_pred == 2, mutation == 2)}
    for j, f in enumerate(FLAGS):
        out[f] = _pr(np.asarray(flags_pred)[:, j], np.asarray(flags)[:, j])
    return out


def allowed_at_default(levels) -> np.ndarray:
    """bool [N]: the default policy (allow_level 3, no arguments known) lets the tool through."""

    return np.asarray(levels) <= DEFAULT_ALLOW_LEVEL


def dimension_row(registry, probs, policy: DimensionPolicy, mutation, flags) -> dict:
    """Gate and dimension metrics of the dimension assessment with ``probs`` [N, 7] (None: no model)."""
    dims = assess_dimensions(registry, probs, policy)
    out = gate_metrics(allowed_at_default(dims.levels), must_confirm(mutation, flags))
    out["dimensions"] = dimension_metrics(dims.mutation, dims.flags, mutation, flags)
    return out


def choose_thresholds(registry, probs, mutation, flags, base: DimensionPolicy = DimensionPolicy(),
                      target: float = TARGET_RECALL) -> dict:
    """The DimensionPolicy thresholds (for ``base.learned_clears``) with the most reads allowed among those
    whose must-confirm recall reaches ``target`` on these tools (out-of-fold probabilities of training servers;
    never the test fold's), else the highest recall. Returns the fields and the recall / reads allowed there."""

    must = must_confirm(mutation, flags)
    grid = [{"read_threshold": r, "flag_threshold": f, "destructive_threshold": d}
            for r, f, d in itertools.product(READ_GRID, FLAG_GRID,
                                             (0.0,) if base.learned_clears == "reads" else DESTRUCTIVE_GRID)]
    best, best_key = None, None
    for g in grid:
        pol = dataclasses.replace(base, **g)
        m = gate_metrics(allowed_at_default(assess_dimensions(registry, probs, pol).levels), must)
        key = (m["must_confirm_recall"] >= target, m["reads_allowed"] if m["must_confirm_recall"] >= target
               else m["must_confirm_recall"], m["must_confirm_recall"])
        if best_key is None or key > best_key:
            best, best_key = dict(g, learned_clears=base.learned_clears, recall=m["must_confirm_recall"],
                                  reads_allowed=m["reads_allowed"]), key
    return best


def policy_fields(chosen: dict) -> dict:
    """The DimensionPolicy fields of a choose_thresholds result."""
    return {k: v for k, v in chosen.items() if k in DimensionPolicy.__dataclass_fields__}


# ------------------------------------------------------------------------------------------------ baselines


def annotations_only(registry) -> np.ndarray:
    """bool [N] allowed: confirm everything unless the server sent readOnlyHint: true (trusted as sent)."""
    return np.array([t.annotations is not None and t.annotations.declared_true("readOnlyHint")
                     for t in registry.tools])


def spec_defaults(registry) -> np.ndarray:
    """bool [N] allowed under the MCP specification's defaults, annotations trusted as sent: read-only tools,
    and writes that are explicitly neither destructive nor open-world; an absent hint takes its default
    (not read-only, destructive, open-world)."""
    out = []
    for t in registry.tools:
        a = t.annotations
        if a is None:
            out.append(False)
            continue
        out.append(bool(a.read_only or (not a.destructive and not a.open_world)))
    return np.array(out, bool)


__all__ = ["gate_metrics", "dimension_metrics", "dimension_row", "choose_thresholds", "policy_fields",
           "annotations_only", "spec_defaults", "allowed_at_default", "TARGET_RECALL"]
