"""Cost of the cross-encoder second stage on this machine: pairs/s of scoring and of training, and what that
projects to for reranking a benchmark's test queries and for one training epoch.

Model: ``init_from_encoder()`` (the embedded all-MiniLM-L6-v2 with a new one-logit head; 6 layers, hidden
384), pairs truncated at 128 tokens. Texts: synthetic English of fixed token counts (the real tokenizer
counts them), two profiles: Seal-Tools-like (tool text ~70 tokens, query ~15) and UltraTool-like (~50 + 15).
Scoring runs ``score_pairs`` (batch 64, warm: compiled before timing). Training runs the jitted Adam step of
``train_cross_encoder`` on 8 queries x (1 gold + 4 negatives) = 40 pairs (warm). Projections: reranking the
top 20 of 700 / 1000 test queries (14,000 / 20,000 pairs), and one training epoch over 700 queries with 4
negatives and one positive each (3,500 pairs; more gold per query costs proportionally more).

    python benchmarks/cross_encoder.py [--pairs 256] [--steps 3]

Why it projects rather than runs a benchmark: on a CPU the cross-encoder is compute-bound and a full rerank or
epoch takes many minutes, so a few warm batches give the rate and the projection follows from the pair counts.
Figures: docs/performance.md, "Tuning the encoder and the cross-encoder".
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORDS = ("get the current weather forecast for a city and return temperature humidity wind speed and a short "
         "summary of conditions search flights between two airports on a given date with price filters book "
         "a hotel room send an email message to a contact list files in a folder create calendar events "
         "translate text into another language convert currency amounts using live exchange rates").split()
PROFILES = {"seal_tools_like": (70, 15), "ultratool_like": (50, 15)}


def text_of(tokenizer, n_tokens: int, offset: int) -> str:
    """Words of WORDS (cycled from ``offset``) until the tokenizer counts ``n_tokens`` tokens."""
    words, i = [], offset
    while len(tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]) < n_tokens:
        words.append(WORDS[i % len(WORDS)])
        i += 1
    return " ".join(words)


def pairs_for(ce, profile: str, n: int):
    tool_len, query_len = PROFILES[profile]
    queries = [text_of(ce.tokenizer, query_len, 7 * i) for i in range(n)]
    tools = [text_of(ce.tokenizer, tool_len, 11 * i + 3) for i in range(n)]
    ids, _ = ce.encode_pairs(queries, tools)
    return queries, tools, sum(map(len, ids)) / n


def time_scoring(ce, queries, tools) -> tuple[float, float]:
    """(compile + first call seconds, warm pairs/s) of score_pairs, batch 64."""
    t0 = time.perf_counter()
    ce.score_pairs(queries[:64], tools[:64], batch_size=64)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    ce.score_pairs(queries, tools, batch_size=64)
    return first, len(queries) / (time.perf_counter() - t0)


def time_training(ce, queries, tools, steps: int) -> tuple[float, float]:
    """(compile + first step seconds, warm pairs/s) of one Adam step on 8 queries x 5 pairs."""
    import jax
    import numpy as np

    from riskrank_jax.model.cross_encoder_train import step_batch

    items = (np.arange(40) % len(tools)).astype(np.int32).reshape(8, 5)  # --pairs below 40 reuses texts
    positive = np.zeros((8, 5), bool)
    positive[:, 0] = True
    batch = step_batch(ce, items, positive, np.arange(8), queries, tools, 8)
    opt, step = ce.train_step(2e-5)
    params, opt_state = ce.params, opt.init(ce.params)
    t0 = time.perf_counter()
    params, opt_state, loss = step(params, opt_state, *batch)
    jax.block_until_ready(loss)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        params, opt_state, loss = step(params, opt_state, *batch)
    jax.block_until_ready(loss)
    return first, 40 * steps / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=256, help="pairs timed per profile for scoring")
    ap.add_argument("--steps", type=int, default=3, help="warm training steps timed per profile")
    args = ap.parse_args(argv)
    import jax

    from riskrank_jax.model.cross_encoder import init_from_encoder

    t0 = time.perf_counter()
    ce = init_from_encoder()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__} on {jax.devices()[0].platform}")
    print(f"model: {ce.name} ({ce.kind}, max_tokens {ce.max_tokens}); loaded in {time.perf_counter() - t0:.1f} s")
    for profile in PROFILES:
        queries, tools, mean_len = pairs_for(ce, profile, args.pairs)
        s_first, s_rate = time_scoring(ce, queries, tools)
        t_first, t_rate = time_training(ce, queries, tools, args.steps)
        print(f"\n{profile}: tool ~{PROFILES[profile][0]} + query ~{PROFILES[profile][1]} tokens, "
              f"{mean_len:.1f} tokens per pair with specials (padded to a multiple of 16)")
        print(f"  score_pairs: {s_rate:,.1f} pairs/s warm (first batch incl. compile {s_first:.1f} s)")
        print(f"  training step (8 queries x 5 pairs): {t_rate:,.1f} pairs/s warm, {40 / t_rate:.2f} s/step "
              f"(first step incl. compile {t_first:.1f} s)")
        for n_q in (700, 1000):
            print(f"  rerank top 20 of {n_q} test queries ({20 * n_q:,} pairs): {20 * n_q / s_rate / 60:.1f} min")
        print(f"  one training epoch, 700 queries x (1 + 4 negatives) = 3,500 pairs: {3500 / t_rate / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
