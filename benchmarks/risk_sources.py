"""Which risk source to trust for user registries: the learned head, the permission keywords, or both.

Prints AUC of detecting r >= 3 and Spearman's rho against audited labels for the demo benchmark (5-fold
cross-validated head) and, when present, UltraTool and Seal-Tools (head trained on the whole demo, i.e. the
shipped head's setting). Seal-Tools' tools are embedded without their parameters (their long schemas are slow
to encode on a CPU: docs/performance.md, "Encoding"). Usage:

    python benchmarks/risk_sources.py [--data-dir DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse

from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.model.risk_head import HeadConfig, predict, train_risk_head
from riskrank_jax.paths import real_data_available
from riskrank_jax.registry.labelled import benchmark_tools
from riskrank_jax.registry.risk_agreement import compare_sources, cross_val_scores


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)
    enc, cache, cfg = load_encoder(None), EmbeddingCache(args.cache_dir), HeadConfig()
    demo = benchmark_tools("demo")
    demo_emb = embed_texts(enc, list(demo.texts), cache)
    sets = {"demo (5-fold CV)": (cross_val_scores(demo_emb, demo.risk, 5, cfg), demo)}
    if args.data_dir is not None or real_data_available():
        params, _ = train_risk_head(demo_emb, demo.risk, cfg)
        for name in ("ultratool", "sealtools"):
            data = benchmark_tools(name, args.data_dir, with_params=False)
            sets[f"{name} (head trained on demo)"] = (predict(params, embed_texts(enc, list(data.texts), cache)), data)
    for name, (f, data) in sets.items():
        print(f"\n{name}: {len(data.risk)} tools, {int((data.risk >= 3).sum())} with r >= 3")
        print(f"| {'source':<40} | AUC r>=3 | Spearman |\n|{'-' * 42}|----------|----------|")
        for row, m in compare_sources(f, data.texts, data.risk).items():
            print(f"| {row:<40} | {m['auc_r>=3']:8.3f} | {m['spearman']:8.3f} |")


if __name__ == "__main__":
    main()
