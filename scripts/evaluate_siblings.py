"""Evaluate a zero-shot ranker on the held-out sibling-tools set (experiments/siblings; issue 49).

Loads the tool lists of the set's servers (experiments/siblings/servers.json: corpus files under
experiments/mcp_risk/corpus/servers/) into one registry the way `riskrank-jax rank FILE...` does, builds the
zero-shot default ranker over them (`Ranker.from_registry`, config ``DEFAULT_REGISTRY_CONFIG``, as `rank` uses),
ranks every request of experiments/siblings/requests.jsonl and reports, over all requests, sibling traps,
non-traps and per server:

  top1       share of requests whose first tool is a gold tool (success@1)
  ndcg@5     metrics.ndcg_at_k, k = 5 (binary relevance, every gold tool relevant)
  recall@5   metrics.recall_at_k, k = 5
  mrr        metrics.mrr over the full ranking
  sibling share of top-1 misses: a miss whose first tool is a *sibling* of a gold tool — on the same server as a
             gold tool and sharing at least one name word with it. Name words: the tool name split on _ - . /
             spaces and camelCase, lower-cased, without the generic words in GENERIC_WORDS (verbs such as get,
             list, create, update, delete, add, remove, set; function words; "multiple", "new", "all") and without
             the words of the server's own name (the "discord" of discord_send, the "mobile" of mobile_list_apps).
             Plural words are made singular first (tables -> table).
             So pause_dag / unpause_dag (dag), mute_host / unmute_host (host), sftp-upload / sftp-download (sftp),
             get_rum_page_performance / get_rum_page_waterfall (rum, page) are siblings; discord_delete_category /
             discord_delete_channel (only the verb in common) are not. The same-server share (any tool of a gold
             tool's server) is reported beside it.

The set is held out: no setting of this project may be chosen by these figures (experiments/siblings/README.md).

Usage:
  python scripts/evaluate_siblings.py                                  # the default, as `riskrank-jax rank`
  python scripts/evaluate_siblings.py --config-set lam=0 --label lambda0
  python scripts/evaluate_siblings.py --config-set first_stage=dense --config-set server_context=false
  python scripts/evaluate_siblings.py --json experiments/siblings/results_default.json \\
      --misses experiments/siblings/misses_default.txt
`--config-set KEY=VALUE` (repeatable) changes one RankConfig field of the default (see RankConfig in
riskrank_jax/rank/ranker.py); a new stage that is a RankConfig switch is evaluated the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import platform
import re
import subprocess
import sys
import time
import typing
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import riskrank_jax
from riskrank_jax import metrics
from riskrank_jax.encode.embedding_cache import EmbeddingCache
from riskrank_jax.encode.families import load_encoder
from riskrank_jax.rank.ranker import DEFAULT_REGISTRY_CONFIG, RankConfig, Ranker
from riskrank_jax.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
SET_DIR = ROOT / "experiments" / "siblings"
K = 5

# words that do not make two tools siblings: generic verbs, function words, quantity words
GENERIC_WORDS = frozenset([
    "get", "gets", "list", "lists", "create", "creates", "update", "updates", "delete", "deletes", "add", "adds",
    "remove", "removes", "set", "sets", "read", "reads", "run", "runs", "edit", "edits", "send", "sends", "search",
    "query", "describe", "manage", "fetch", "show", "make", "new", "all", "multiple", "many", "one", "by", "to",
    "on", "at", "from", "of", "in", "for", "and", "or", "with", "across", "my", "a", "an", "the", "is", "id", "ids",
    "info", "details",
])


# --------------------------------------------------------------------------------------------- the set
def load_set(set_dir: Path = SET_DIR) -> tuple[list[dict], list[dict]]:
    """(servers of servers.json, requests of requests.jsonl)."""
    servers = json.loads((set_dir / "servers.json").read_text())["servers"]
    requests = [json.loads(line) for line in (set_dir / "requests.jsonl").read_text().splitlines() if line.strip()]
    return servers, requests


def name_words(name: str) -> list[str]:
    """Lower-cased words of a tool or server name: split on _ - . / spaces, then camelCase and digits."""
    words = []
    for part in re.split(r"[_\-./\s]+", name):
        words += re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", part)
    return [w.lower() for w in words if w]


def singular(word: str) -> str:
    """A crude singular, the same on both sides of a comparison: tables -> table, entries -> entry, crashes -> crash."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word


def content_words(tool: str, server: str) -> frozenset[str]:
    """A tool name's words, made singular, without GENERIC_WORDS and without the words of its server's name."""
    drop = {singular(w) for w in GENERIC_WORDS} | {singular(w) for w in name_words(server)}
    return frozenset(singular(w) for w in name_words(tool)) - drop


def is_sibling(pred: tuple[str, str], gold: list[tuple[str, str]]) -> bool:
    """Whether the predicted (server, tool) is a sibling of a gold one (module docstring's definition)."""
    return any(pred[0] == g[0] and pred[1] != g[1] and content_words(pred[1], pred[0]) & content_words(g[1], g[0])
               for g in gold)


# --------------------------------------------------------------------------------------------- config
def _parse_value(key: str, raw: str, annotation, default):
    text = raw.strip()
    if text.lower() in ("none", "null") and (default is None or "None" in str(annotation)):
        return None
    kind = type(default) if default is not None else int
    if kind is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise SystemExit(f"--config-set {key}={raw}: {key} takes true or false")
    try:
        return kind(text)
    except ValueError:
        raise SystemExit(f"--config-set {key}={raw}: {key} takes a {kind.__name__}") from None


def config_with(changes: list[str], base: RankConfig = DEFAULT_REGISTRY_CONFIG) -> RankConfig:
    """``base`` with each KEY=VALUE of ``changes`` applied (KEY a RankConfig field; "-" read as "_")."""
    fields = {f.name: f for f in dataclasses.fields(RankConfig)}
    hints = typing.get_type_hints(RankConfig)
    out = {}
    for item in changes:
        key, eq, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in fields:
            raise SystemExit(f"--config-set {item!r}: expected KEY=VALUE with KEY one of {', '.join(fields)}")
        out[key] = _parse_value(key, raw, hints[key], getattr(base, key))
    return dataclasses.replace(base, **out)


# --------------------------------------------------------------------------------------------- ranking
def build_ranker(servers: list[dict], config: RankConfig, cache_dir=None, encoder=None):
    """(ranker, [(server, tool)] per ranker index): the servers' corpus files loaded as `riskrank-jax rank
    FILE...` loads them, the zero-shot ranker built over them with ``config`` and ``encoder`` (a name or directory
    as `--encoder` takes; None: the default)."""
    paths = [str(ROOT / s["file"]) for s in servers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = load_registry(paths)
    encoder = load_encoder(encoder, cache_dir=cache_dir)
    ranker = Ranker.from_registry(reg, encoder=encoder, cache=EmbeddingCache(cache_dir), config=config)
    by_name = {t.name: (t.source, t.raw_name) for t in reg.tools}
    ids = [by_name[n] for n in ranker.tool_names]
    return ranker, ids


def _gold_ids(requests, index) -> np.ndarray:
    width = max(len(r["gold"]) for r in requests)
    gold = np.full((len(requests), width), -1, np.int32)
    for i, r in enumerate(requests):
        for j, g in enumerate(r["gold"]):
            server, _, tool = g.partition(".")
            if (server, tool) not in index:
                raise SystemExit(f"{r['id']}: gold {g} is not a tool of the registry")
            gold[i, j] = index[(server, tool)]
    return gold


def _summary(rows: list[dict]) -> dict:
    """Mean figures of per-request rows, and the misses' sibling / same-server shares."""
    n = len(rows)
    if n == 0:
        return {"n": 0}
    misses = [r for r in rows if not r["top1"]]
    out = {"n": n,
           "top1": float(np.mean([r["top1"] for r in rows])),
           "ndcg@5": float(np.mean([r["ndcg@5"] for r in rows])),
           "recall@5": float(np.mean([r["recall@5"] for r in rows])),
           "mrr": float(np.mean([r["mrr"] for r in rows])),
           "top1_misses": len(misses),
           "sibling_misses": sum(r["miss_is_sibling"] for r in misses),
           "same_server_misses": sum(r["miss_same_server"] for r in misses)}
    out["sibling_share_of_misses"] = out["sibling_misses"] / len(misses) if misses else None
    out["same_server_share_of_misses"] = out["same_server_misses"] / len(misses) if misses else None
    return out


def evaluate(ranker: Ranker, ids: list[tuple[str, str]], requests: list[dict]) -> dict:
    """Per-request rows and summaries (all, traps, non-traps, per server) of ``ranker`` on ``requests``."""
    index = {st: i for i, st in enumerate(ids)}
    gold = _gold_ids(requests, index)
    queries = [r["request"] for r in requests]
    q_emb = ranker.encode_queries(queries)
    t0 = time.perf_counter()
    ranking = np.asarray(ranker.rank(q_emb, k=ranker.size, q_texts=queries))
    rank_s = time.perf_counter() - t0
    rj, gj = jnp.asarray(ranking), jnp.asarray(gold)
    top1 = np.asarray(metrics.success_at_k(rj, gj, k=1))
    ndcg = np.asarray(metrics.ndcg_at_k(rj, gj, k=K))
    rec = np.asarray(metrics.recall_at_k(rj, gj, k=K))
    rr = np.asarray(metrics.mrr(rj, gj))
    rows = []
    for i, r in enumerate(requests):
        gold_st = [ids[g] for g in gold[i] if g >= 0]
        pred = ids[int(ranking[i, 0])]
        hit = bool(top1[i] > 0)
        gold_rank = min(int(np.where(ranking[i] == g)[0][0]) + 1 for g in gold[i] if g >= 0)
        rows.append({"id": r["id"], "request": r["request"], "gold": r["gold"], "sibling_trap": bool(r["sibling_trap"]),
                     "server": gold_st[0][0], "predicted": f"{pred[0]}.{pred[1]}",
                     "top5": [".".join(ids[int(t)]) for t in ranking[i, :K]], "gold_rank": gold_rank,
                     "top1": hit, "ndcg@5": float(ndcg[i]), "recall@5": float(rec[i]), "mrr": float(rr[i]),
                     "miss_is_sibling": (not hit) and is_sibling(pred, gold_st),
                     "miss_same_server": (not hit) and any(pred[0] == g[0] for g in gold_st)})
    servers = sorted({row["server"] for row in rows})
    return {"all": _summary(rows),
            "sibling_trap": _summary([x for x in rows if x["sibling_trap"]]),
            "no_trap": _summary([x for x in rows if not x["sibling_trap"]]),
            "per_server": {s: _summary([x for x in rows if x["server"] == s]) for s in servers},
            "rank_seconds": rank_s, "requests": rows}


def code_state() -> dict:
    """The repository's commit and whether the riskrank_jax that was imported is that commit's (no uncommitted
    change under riskrank_jax/), so a figure can be traced to the code that gave it."""
    pkg = Path(riskrank_jax.__file__).resolve().parent
    out = {"riskrank_jax": str(pkg)}
    try:
        out["git_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                           text=True, check=True).stdout.strip()
        if pkg == ROOT / "riskrank_jax":
            dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "riskrank_jax"],
                                   capture_output=True, text=True, check=True).stdout.strip()
            out["riskrank_jax_uncommitted_changes"] = bool(dirty)
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


# --------------------------------------------------------------------------------------------- output
def _fmt(s: dict) -> str:
    share = "-" if s.get("sibling_share_of_misses") is None else f"{s['sibling_share_of_misses']:.2f}"
    same = "-" if s.get("same_server_share_of_misses") is None else f"{s['same_server_share_of_misses']:.2f}"
    return (f"{s['n']:>4}  {s['top1']:.3f}  {s['ndcg@5']:.3f}  {s['recall@5']:.3f}  {s['mrr']:.3f}  "
            f"{s['top1_misses']:>6}  {share:>7}  {same:>11}")


def report_text(result: dict) -> str:
    head = f"{'':<28}{'n':>4}  {'top1':>5}  {'ndcg@5':>6}  {'rec@5':>5}  {'mrr':>5}  {'misses':>6}  " \
           f"{'sibling':>7}  {'same server':>11}"
    lines = [f"config: {result['config_label']}  ({result['config_changes'] or 'the default'})", head]
    for key in ("all", "sibling_trap", "no_trap"):
        lines.append(f"{key:<28}" + _fmt(result[key]))
    for s, summ in result["per_server"].items():
        lines.append(f"  {s:<26}" + _fmt(summ))
    return "\n".join(lines)


def misses_text(result: dict) -> str:
    rows = [r for r in result["requests"] if not r["top1"]]
    out = [(f"# top-1 misses on experiments/siblings ({result['config_label']}: "
            f"{result['config_changes'] or 'the default'}); {len(rows)} of {result['all']['n']} requests"),
           "# kind: sibling (same server, shared name word), same-server, other-server; gold rank in the full ranking",
           ""]
    for r in rows:
        kind = "sibling" if r["miss_is_sibling"] else "same-server" if r["miss_same_server"] else "other-server"
        out += [f"[{r['id']}] {r['request']}",
                f"  gold:      {', '.join(r['gold'])} (rank {r['gold_rank']}){'  [trap]' if r['sibling_trap'] else ''}",
                f"  predicted: {r['predicted']}  ({kind})",
                f"  top 5:     {', '.join(r['top5'])}", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config-set", action="append", default=[], metavar="KEY=VALUE",
                    help="change one RankConfig field of the default (repeatable), e.g. lam=0, first_stage=dense, "
                         "server_context=false, n_candidates=none")
    ap.add_argument("--label", default=None, help="a name for this configuration in the output (default: "
                                                    "'default' or the changes)")
    ap.add_argument("--json", dest="json_out", default=None, metavar="OUT", help="write the figures and the "
                                                                                 "per-request rows as JSON")
    ap.add_argument("--misses", default=None, metavar="OUT", help="write each top-1 miss (request, gold, predicted, "
                                                                  "top 5) as text")
    ap.add_argument("--set-dir", default=str(SET_DIR), help="the set's folder (servers.json, requests.jsonl)")
    ap.add_argument("--cache-dir", default=None, help="embedding cache folder (default as `riskrank-jax rank`)")
    ap.add_argument("--encoder", default=None, help="the encoder, as `riskrank-jax rank --encoder` takes it: a name "
                                                    "(minilm, mpnet, use, e5, a fusion such as minilm+use) or a "
                                                    "model directory (default: minilm)")
    args = ap.parse_args(argv)

    config = config_with(args.config_set)
    servers, requests = load_set(Path(args.set_dir))
    t0 = time.perf_counter()
    ranker, ids = build_ranker(servers, config, args.cache_dir, args.encoder)
    build_s = time.perf_counter() - t0
    result = evaluate(ranker, ids, requests)
    result = {"set": "experiments/siblings", "config_label": args.label or (
                  "default" if not args.config_set else ",".join(args.config_set)),
              "config_changes": ", ".join(args.config_set), "config": dataclasses.asdict(config),
              "encoder": ranker.encoder_id, "registry_fingerprint": ranker.registry_fingerprint,
              "tools": ranker.size, "servers": [s["server"] for s in servers],
              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": f"{platform.machine()} {platform.system()}, jax {jax.__version__} on "
                         f"{jax.devices()[0].platform}, Python {platform.python_version()}",
              "code": code_state(), "build_seconds": round(build_s, 1), **result}
    print(report_text(result))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.misses:
        Path(args.misses).write_text(misses_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
