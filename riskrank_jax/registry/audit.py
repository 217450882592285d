"""`riskrank-jax registry audit`: every tool with its risk level, where that level came from, its permission
categories and risk keyword groups, and its warnings — as rows (dicts), a text table, JSON or CSV.

Why: a user should see each tool's risk and where it came from before trusting a ranking.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

import numpy as np

from riskrank_jax.model.risk_head import RiskHead, default_head
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.risk import RiskAssessment, RiskPolicy, assess_risk

CSV_FIELDS = ("name", "risk", "risk_source", "learned", "categories", "risk_keywords", "annotations", "format",
              "source", "file", "line", "warnings")


def head_scores(registry: Registry, encoder, cache, head: RiskHead | None = None) -> np.ndarray:
    """f_risk [N] of the registry's tool texts (embedded with `encoder`, cached by text)."""
    from riskrank_jax.encode.embedding_cache import embed_texts

    head = head or default_head()
    head.check_encoder(encoder.model_id, int(encoder.dim))
    return head.scores(embed_texts(encoder, list(registry.texts), cache))


def audit_rows(registry: Registry, risk: RiskAssessment) -> list[dict]:
    """One dict per tool (keys: CSV_FIELDS; lists for categories, risk_keywords (the matched RISK_KEYWORDS
    groups), annotations and warnings)."""
    rows = []
    for i, t in enumerate(registry.tools):
        ann = t.annotations
        rows.append({
            "name": t.name, "risk": int(risk.levels[i]), "risk_source": list(risk.sources[i]),
            "learned": None if np.isnan(risk.learned[i]) else round(float(risk.learned[i]), 4),
            "categories": list(risk.categories[i]), "risk_keywords": list(risk.groups[i]),
            "annotations": [] if ann is None else sorted(f"{h}={str(v).lower()}" for h, v in ann.as_dict().items()
                                                         if h in ann.declared),
            "format": t.format, "source": t.source, "file": t.path, "line": t.line, "warnings": list(t.warnings),
        })
    return rows


def audit(registry: Registry, scores=None, policy: RiskPolicy = RiskPolicy()) -> dict:
    """{"tools": rows, "warnings": registry-level warnings, "summary": counts, "fingerprint": ...}."""
    rows = audit_rows(registry, assess_risk(registry, scores, policy))
    return {"tools": rows, "warnings": list(registry.warnings), "summary": summarize(rows),
            "fingerprint": registry.fingerprint(), "trust_annotations": policy.trust_annotations}


def summarize(rows: list[dict]) -> dict:
    """Counts of tools per risk level, per risk source (each source of a tool counted once) and with warnings."""
    return {
        "tools": len(rows),
        "per_level": {str(r): sum(row["risk"] == r for row in rows) for r in range(1, 6)},
        "per_source": dict(sorted(Counter(s.split(":")[0] if s.startswith("keywords") else s
                                          for row in rows for s in row["risk_source"]).items())),
        "per_source_detail": dict(sorted(Counter(",".join(row["risk_source"]) for row in rows).items())),
        "with_warnings": sum(bool(row["warnings"]) for row in rows),
    }


def to_csv(rows: list[dict]) -> str:
    """CSV with a header; list fields joined with ';', missing values empty."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ";".join(v) if isinstance(v, list) else ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def to_text(report: dict) -> str:
    """A fixed-width table, most risky first (input order within a level), then the summary."""
    rows = sorted(report["tools"], key=lambda r: -r["risk"])
    width = max([len(r["name"]) for r in rows] + [4])
    src = max([len(",".join(r["risk_source"])) for r in rows] + [34])
    lines = [f"{'risk':>4}  {'name':<{width}}  {'source':<{src}}  {'keywords':<20}  warnings"]
    for r in rows:  # keywords: the permission categories, then the risk keyword groups
        kws = ",".join(r["categories"] + r.get("risk_keywords", [])) or "-"
        lines.append(f"{r['risk']:>4}  {r['name']:<{width}}  {','.join(r['risk_source']):<{src}}  "
                     f"{kws:<20}  {'; '.join(r['warnings'])}")
    s = report["summary"]
    lines.append(f"{s['tools']} tools; risk levels 1..5: " + " / ".join(str(s["per_level"][str(k)]) for k in range(1, 6))
                 + "; sources: " + ", ".join(f"{k} {v}" for k, v in s["per_source"].items())
                 + f"; {s['with_warnings']} with warnings")
    return "\n".join(lines)
