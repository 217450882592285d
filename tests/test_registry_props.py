"""Property tests: the adapters turn any JSON into a Registry or a RiskRankError, never another exception."""

from __future__ import annotations

import json
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riskrank_jax.errors import RiskRankError
from riskrank_jax.registry import Registry, load_registry
from riskrank_jax.registry.risk import assess_risk

KEYS = ["name", "title", "description", "inputSchema", "input_schema", "parameters", "annotations", "readOnlyHint",
        "destructiveHint", "type", "function", "tools", "result", "jsonrpc", "error", "risk", "_id", "text",
        "properties", "serverInfo", "server", "metadata"]
SCALARS = (st.none() | st.booleans() | st.integers(-3, 9) | st.integers() | st.floats(allow_nan=False)
           | st.sampled_from(["function", "custom", "web_search", "x", "", "delete files", "2.0"]) | st.text(max_size=8))
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), children, max_size=5),
    max_leaves=25,
)
# Tool-like entries (a name plus random fields) inside the accepted wrappers, so many inputs load.
TOOLISH = st.builds(lambda name, extra: {"name": name, **extra}, st.text(min_size=1, max_size=6) | SCALARS,
                    st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4))
WRAPPED = st.lists(TOOLISH | JSON, min_size=1, max_size=5).flatmap(lambda tools: st.sampled_from([
    tools, {"tools": tools}, {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}, [{"tools": tools}, tools]]))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(load):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            reg = load()
        except RiskRankError:
            return None
    assert isinstance(reg, Registry) and reg.size > 0
    assert len(set(reg.names)) == reg.size
    assert len(reg.texts) == reg.size and len(reg.fingerprint()) == 16
    risk = assess_risk(reg)
    assert ((risk.levels >= 1) & (risk.levels <= 5)).all()
    return reg


@SETTINGS
@given(JSON | WRAPPED)
def test_inline_documents(doc):
    _check(lambda: load_registry([("src", doc)]))


@SETTINGS
@given(st.lists(JSON | WRAPPED, min_size=1, max_size=3), st.booleans())
def test_files_json_and_jsonl(tmp_path_factory, docs, jsonl):
    d = tmp_path_factory.mktemp("p")
    if jsonl:
        path = d / "reg.jsonl"
        path.write_text("\n".join(json.dumps(x) for x in docs))
    else:
        path = d / "reg.json"
        path.write_text(json.dumps(docs[0]))
    _check(lambda: load_registry(path))


@SETTINGS
@given(st.text(max_size=40))
def test_arbitrary_text_files(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("t") / "reg.json"
    path.write_text(text, encoding="utf-8")
    _check(lambda: load_registry(path))
