"""`riskrank-jax registry audit`: every tool with its risk level, where that level came from, its risk dimensions
with their sources, what the gateway's default policy would do with a call to it ("call": "allowed", "needs
confirmation", "refused"), its permission categories and risk keyword groups, and its warnings — as rows
(dicts), a text table, JSON or CSV.

Why: a user should see each tool's risk and where it came from before trusting a ranking.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

import numpy as np

from riskrank_jax.encode.embedding_cache import embed_texts
from riskrank_jax.encode.families import risk_encoder
from riskrank_jax.model.risk_head import RiskHead, default_head
from riskrank_jax.rank.registry_inputs import assess_dimensions_risk
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.dimensions import DimensionPolicy, assess_dimensions, assessment_to_risk, describe
from riskrank_jax.registry.risk import RiskAssessment, RiskPolicy, assess_risk
from riskrank_jax.serve.policy import Policy, ToolState, decide_call

CSV_FIELDS = ("name", "risk", "risk_source", "call", "dimensions", "learned", "categories", "risk_keywords",
              "annotations", "format", "source", "file", "line", "warnings")
CALL_WORDS = {"allow": "allowed", "confirm": "needs confirmation", "refuse": "refused"}


def assess(registry: Registry, encoder, cache, head: RiskHead | None = None,
           policy: RiskPolicy = RiskPolicy()) -> RiskAssessment:
    """The risk of every tool as `rank` and `serve` assess it: by dimensions with the shipped risk model
    (`rank.registry_inputs.assess_dimensions_risk`), or with an explicit ``head`` the level rule of
    `assess_risk`. Tool texts are embedded with ``encoder`` (cached) unless every tool declares its risk."""
    undeclared = any(r is None for r in registry.declared_risk)
    if head is not None:
        return assess_risk(registry, head_scores(registry, encoder, cache, head) if undeclared else None, policy)
    if not undeclared:
        return assessment_to_risk(registry, assess_dimensions(registry, None, _dimension_policy(policy)))
    reader = risk_encoder(encoder)  # the shipped risk model reads MiniLM's vectors, whatever ranks
    emb = embed_texts(reader, list(registry.texts), cache)
    return assess_dimensions_risk(registry, emb, str(reader.model_id), int(reader.dim), policy)[0]


def _dimension_policy(policy: RiskPolicy):
    return DimensionPolicy(trust_annotations=policy.trust_annotations, trusted_sources=policy.trusted_sources)


def head_scores(registry: Registry, encoder, cache, head: RiskHead | None = None) -> np.ndarray:
    """f_risk [N] of the registry's tool texts (embedded with `encoder`, cached by text)."""
    head = head or default_head()
    head.check_encoder(encoder.model_id, int(encoder.dim))
    return head.scores(embed_texts(encoder, list(registry.texts), cache))


def audit_rows(registry: Registry, risk: RiskAssessment) -> list[dict]:
    """One dict per tool (keys: CSV_FIELDS; lists for categories, risk_keywords (the matched RISK_KEYWORDS
    groups, or with dimensions the dimensions that hold), annotations and warnings; "dimensions": per dimension
    {"value", "source"} and the "argument_rule", or None without dimensions; "call": what the gateway's default
    policy does with a call (the decision of an argument-dependent tool without its arguments))."""
    dims = risk.dimensions
    rows = []
    for i, t in enumerate(registry.tools):
        ann = t.annotations
        row = None if dims is None else dims.row(i)
        d = decide_call(Policy(), ToolState(f"{t.source}.{t.raw_name}", t.source, int(risk.levels[i]),
                                            risk.source_text(i), row, {"name": t.raw_name}))
        rows.append({
            "name": t.name, "risk": int(risk.levels[i]), "risk_source": list(risk.sources[i]),
            "call": CALL_WORDS[d.action], "dimensions": row,
            "learned": None if np.isnan(risk.learned[i]) else round(float(risk.learned[i]), 4),
            "categories": list(risk.categories[i]), "risk_keywords": list(risk.groups[i]),
            "annotations": [] if ann is None else sorted(f"{h}={str(v).lower()}" for h, v in ann.as_dict().items()
                                                         if h in ann.declared),
            "format": t.format, "source": t.source, "file": t.path, "line": t.line, "warnings": list(t.warnings),
        })
    return rows


def audit(registry: Registry, scores=None, policy: RiskPolicy = RiskPolicy(), risk: RiskAssessment | None = None) -> dict:
    """{"tools": rows, "warnings": registry-level warnings, "summary": counts, "fingerprint": ...}; ``risk``: the
    assessment (`assess`), else `assess_risk` over the head scores ``scores``."""
    rows = audit_rows(registry, assess_risk(registry, scores, policy) if risk is None else risk)
    return {"tools": rows, "warnings": list(registry.warnings), "summary": summarize(rows),
            "fingerprint": registry.fingerprint(), "trust_annotations": policy.trust_annotations}


def summarize(rows: list[dict]) -> dict:
    """Counts of tools per risk level, per risk source (each source of a tool counted once) and with warnings."""
    return {
        "tools": len(rows),
        "per_level": {str(r): sum(row["risk"] == r for row in rows) for r in range(1, 6)},
        "per_source": dict(sorted(Counter(k for row in rows for k in _source_kinds(row)).items())),
        "per_source_detail": dict(sorted(Counter(",".join(row["risk_source"]) for row in rows).items())),
        "with_warnings": sum(bool(row["warnings"]) for row in rows),
        "per_call": dict(sorted(Counter(row["call"] for row in rows).items())),
    }


def _source_kinds(row: dict) -> list[str]:
    """The kinds of source of one row, each once: "declared", "learned", "keywords", "mcp:<hint>", "spec default"
    ..., from its dimensions when it has them."""
    dims = row.get("dimensions")
    if dims is None or row["risk_source"] == ["declared"]:
        return sorted({s.split(":")[0] if s.startswith("keywords") else s for s in row["risk_source"]})
    srcs = [dims["mutation"]["source"]] + [v["source"] for k, v in dims.items()
                                             if isinstance(v, dict) and k != "mutation" and v["value"]]
    return sorted({"keywords" if s.startswith("keywords") else s.split(", ")[0].split("=")[0].split(" (")[0]
                   for s in srcs if s})


def to_csv(rows: list[dict]) -> str:
    """CSV with a header; list fields joined with ';', missing values empty."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in rows:
        row = dict(row, dimensions=_dimension_text(row["dimensions"]))
        w.writerow({k: ";".join(v) if isinstance(v, list) else ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def _dimension_text(row: dict | None) -> str:
    if row is None:
        return ""
    return describe(row) + (f"; argument rule {row['argument_rule']}" if row.get("argument_rule") else "")


def to_text(report: dict) -> str:
    """A fixed-width table, most risky first (input order within a level), then the summary."""
    rows = sorted(report["tools"], key=lambda r: -r["risk"])
    width = max([len(r["name"]) for r in rows] + [4])
    src = max([len(",".join(r["risk_source"])) for r in rows] + [34])
    lines = [f"{'risk':>4}  {'name':<{width}}  {'call':<18}  {'source':<{src}}  {'keywords':<20}  warnings"]
    for r in rows:  # keywords: the permission categories, then the risk keyword groups (or the dimensions)
        kws = ",".join(r["categories"] + r.get("risk_keywords", [])) or "-"
        rule = (r.get("dimensions") or {}).get("argument_rule")
        source = ",".join(r["risk_source"]) + (f"; per call: {rule}" if rule else "")
        lines.append(f"{r['risk']:>4}  {r['name']:<{width}}  {r.get('call', ''):<18}  {source:<{src}}  "
                     f"{kws:<20}  {'; '.join(r['warnings'])}")
    s = report["summary"]
    lines.append(f"{s['tools']} tools; risk levels 1..5: " + " / ".join(str(s["per_level"][str(k)]) for k in range(1, 6))
                 + "; sources: " + ", ".join(f"{k} {v}" for k, v in s["per_source"].items())
                 + f"; {s['with_warnings']} with warnings"
                 + ("; calls: " + ", ".join(f"{k} {v}" for k, v in s["per_call"].items()) if "per_call" in s else ""))
    return "\n".join(lines)
