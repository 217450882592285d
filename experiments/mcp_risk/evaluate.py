"""Train the MCP risk model on the labelled corpus and judge it by folds over servers.

    python experiments/mcp_risk/evaluate.py [--data-dir DIR] [--folds 5] [--ship]

Writes experiments/results/mcp_risk/results.json and results.md: per row (the shipped model `riskrank` and the
baselines, on the same folds) the gate's must-confirm recall and reads allowed at the default policy, and
per-dimension precision and recall where the row has dimensions. With --ship, trains the model on the whole
corpus (thresholds chosen on its out-of-fold probabilities) and writes riskrank_jax/model/mcp_risk_model.npz
with the corpus fingerprint.

Per outer fold: the model is trained on the other folds' servers; its thresholds are chosen by an inner
cross-validation over those training servers (never on the test fold); the test servers are then assessed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from riskrank_jax.registry.mcp_corpus import load_corpus, server_folds  # noqa: E402
from riskrank_jax.registry import mcp_risk  # noqa: E402
from riskrank_jax.experiments.mcp_risk_eval import (annotations_only, choose_thresholds, dimension_row,  # noqa: E402
                                              gate_metrics, policy_fields, spec_defaults, TARGET_RECALL)
from riskrank_jax.registry.dimensions import DimensionPolicy, must_confirm  # noqa: E402

CORPUS = ROOT / "experiments" / "mcp_risk" / "corpus"
OUT = ROOT / "experiments" / "results" / "mcp_risk"
ROW_NOTES = {
    "riskrank": "shipped rule: dimensions from the learned model (it may clear an untrusted server's tool only "
                "as a read), keywords, annotations under the specification's defaults",
    "riskrank_reversible": "the same, but the model may also clear local reversible writes",
    "model_alone": "the learned model's dimensions at 0.5, no specification defaults",
    "spec_defaults_keywords": "dimensions without a model: keywords and the specification's defaults",
    "annotations_only": "confirm unless readOnlyHint: true (annotations trusted)",
    "spec_defaults": "the specification's defaults, annotations trusted: read-only, or neither destructive nor "
                     "open-world",
    "keyword_floors": "the previous level rule's keyword floors and annotations, no head, allow_level 3",
    "todays_model": "the previous default: demo-trained risk head + keyword floors (assess_risk), allow_level 3",
    "confirm_everything": "ask for every call",
}


def subset(reg, idx):
    """The registry of the tools ``idx`` (int [M]), in that order."""
    from riskrank_jax.registry.registry import Registry

    return Registry(tuple(reg.tools[i] for i in idx), reg.warnings, reg.sources)


def oof_probs(x, y, folds, config) -> np.ndarray:
    """Out-of-fold probabilities [N, 7]: each fold predicted by a model trained on the other folds."""
    out = np.zeros((x.shape[0], y.shape[1]), np.float32)
    for f in np.unique(folds):
        tr, te = folds != f, folds == f
        params, _ = mcp_risk.train(x[tr], y[tr], config)
        out[te] = mcp_risk.predict(params, x[te])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--ship", action="store_true", help="train on the whole corpus and write the shipped model")
    args = ap.parse_args(argv)

    from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
    from riskrank_jax.encode.encoder import load_encoder
    from riskrank_jax.model.risk_head import default_head
    from riskrank_jax.paths import resolve_data_dir
    from riskrank_jax.registry.risk import assess_risk

    data_dir = resolve_data_dir(args.data_dir)
    corpus = load_corpus(args.corpus, data_dir, reserved=data_dir.parent / "RESERVED_SERVERS.md")
    reg = corpus.registry
    print(f"corpus {corpus.fingerprint}: {corpus.size} tools of {len(set(corpus.servers))} servers; "
          f"{len(corpus.dropped)} labels dropped", file=sys.stderr)
    encoder = load_encoder()
    emb = embed_texts(encoder, list(reg.texts), EmbeddingCache())
    x = mcp_risk.features(emb, reg.texts)
    y = mcp_risk.labels_to_targets(corpus.mutation, corpus.flags)
    folds = server_folds(corpus.servers, args.folds)
    must = must_confirm(corpus.mutation, corpus.flags)
    config = mcp_risk.RiskModelConfig()
    sub = partial(subset, reg)

    variants = {"riskrank": DimensionPolicy(learned_clears="reads"),
                "riskrank_reversible": DimensionPolicy(learned_clears="reversible")}
    preds = {name: {"mutation": np.zeros(corpus.size, np.int8), "flags": np.zeros_like(corpus.flags),
                    "levels": np.zeros(corpus.size, np.int32)} for name in variants}
    chosen_per_fold = {name: [] for name in variants}
    test_probs = np.zeros_like(y)
    for f in range(args.folds):
        tr, te = np.where(folds != f)[0], np.where(folds == f)[0]
        inner = server_folds([corpus.servers[i] for i in tr], min(args.folds - 1, len(set(corpus.servers[i] for i in tr))))
        inner_p = oof_probs(x[tr], y[tr], inner, config)
        params, _ = mcp_risk.train(x[tr], y[tr], config)
        test_probs[te] = mcp_risk.predict(params, x[te])
        for name, base in variants.items():
            ch = choose_thresholds(sub(tr), inner_p, corpus.mutation[tr], corpus.flags[tr], base)
            chosen_per_fold[name].append(ch)
            from riskrank_jax.registry.dimensions import assess_dimensions

            d = assess_dimensions(sub(te), test_probs[te], dataclasses.replace(base, **policy_fields(ch)))
            preds[name]["mutation"][te], preds[name]["flags"][te], preds[name]["levels"][te] = \
                d.mutation, d.flags, d.levels
        print(f"fold {f}: {len(te)} test tools; thresholds {[chosen_per_fold[n][-1] for n in variants]}",
              file=sys.stderr)

    from riskrank_jax.experiments.mcp_risk_eval import allowed_at_default, dimension_metrics

    rows = {}
    for name in variants:
        p = preds[name]
        rows[name] = gate_metrics(allowed_at_default(p["levels"]), must)
        rows[name]["dimensions"] = dimension_metrics(p["mutation"], p["flags"], corpus.mutation, corpus.flags)
        rows[name]["thresholds_per_fold"] = chosen_per_fold[name]
    # the model's own dimensions at 0.5, without the specification's defaults (what it learned)
    mut_m = np.where(test_probs[:, 0] < 0.5, 0, np.where(test_probs[:, 1] >= 0.5, 2, 1))
    flags_m = test_probs[:, 2:] >= 0.5
    from riskrank_jax.registry.dimensions import level_from_dimensions

    rows["model_alone"] = gate_metrics(allowed_at_default(level_from_dimensions(mut_m, flags_m)), must)
    rows["model_alone"]["dimensions"] = dimension_metrics(mut_m, flags_m, corpus.mutation, corpus.flags)
    rows["spec_defaults_keywords"] = dimension_row(reg, None, DimensionPolicy(), corpus.mutation, corpus.flags)
    rows["annotations_only"] = gate_metrics(annotations_only(reg), must)
    rows["spec_defaults"] = gate_metrics(spec_defaults(reg), must)
    rows["keyword_floors"] = gate_metrics(allowed_at_default(assess_risk(reg, None).levels), must)
    head = default_head()
    rows["todays_model"] = gate_metrics(allowed_at_default(assess_risk(reg, head.scores(emb)).levels), must)
    rows["confirm_everything"] = gate_metrics(np.zeros(corpus.size, bool), must)
    for name, r in rows.items():
        r["note"] = ROW_NOTES[name]

    n_servers = len(set(corpus.servers))
    result = {"servers": n_servers, "tools": corpus.size, "split": "by_server", "folds": args.folds,
              "corpus_fingerprint": corpus.fingerprint, "encoder": encoder.model_id,
              "target": {"must_confirm_recall": TARGET_RECALL, "reads_allowed": 0.85},
              "must_confirm_tools": int(must.sum()), "rows": rows,
              "sources": sorted(set(s.split(":")[0] for s in corpus.packages)),
              "dropped_labels": len(corpus.dropped)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    (out / "results.md").write_text(table(result))
    print(table(result))

    if args.ship:
        chosen = {name: choose_thresholds(reg, test_probs, corpus.mutation, corpus.flags, base)
                  for name, base in variants.items()}
        params, _ = mcp_risk.train(x, y, config)
        model = mcp_risk.RiskModel(params, encoder.model_id,
                                   {"fingerprint": corpus.fingerprint, "servers": n_servers, "tools": corpus.size},
                                   config, thresholds=policy_fields(chosen["riskrank"]),
                                   metrics={"held_out": {k: rows["riskrank"][k] for k in
                                                         ("must_confirm_recall", "reads_allowed")},
                                            "oof_thresholds": chosen["riskrank"]})
        path = model.save(ROOT / "riskrank_jax" / "model" / mcp_risk.DEFAULT_MODEL_FILE)
        print(f"wrote {path.relative_to(ROOT)} (thresholds {model.thresholds})", file=sys.stderr)


def table(result: dict) -> str:
    """The markdown table of a results.json."""
    lines = [f"# MCP risk: held-out folds over servers\n",
             f"{result['tools']} tools of {result['servers']} servers ({', '.join(result['sources'])}), "
             f"{result['must_confirm_tools']} of them must-confirm; {result['folds']} folds over servers (no "
             f"server in both training and test); corpus {result['corpus_fingerprint']}. Target: must-confirm "
             f"recall >= {result['target']['must_confirm_recall']} with reads allowed >= "
             f"{result['target']['reads_allowed']}.\n",
             "| row | must-confirm recall | reads allowed | asked | writes P / R | destructive P / R | public sink P / R "
             "| secret source P / R | untrusted content P / R | execution P / R | money P / R |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["rows"].items():
        cells = [name, f"{r['must_confirm_recall']:.3f}", f"{r['reads_allowed']:.3f}", f"{r['asked']:.3f}"]
        for d in ("writes", "destructive", "public_sink", "secret_source", "untrusted_content", "execution", "money"):
            m = (r.get("dimensions") or {}).get(d)
            cells.append("-" if m is None else f"{_f(m['precision'])} / {_f(m['recall'])}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"* `{name}`: {r['note']}" for name, r in result["rows"].items()]
    return "\n".join(lines) + "\n"


def _f(v) -> str:
    return "n/a" if v != v else f"{v:.2f}"


if __name__ == "__main__":
    main()
