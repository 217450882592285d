"""The labelled corpus of real MCP tools (experiments/mcp_risk/corpus): label lines, gathered servers, provenance,
the reserved packages left out, and (realdata) the LiveMCPBench labels against the benchmark's tools.json."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from riskrank_jax.paths import REPO_ROOT

CORPUS = REPO_ROOT / "experiments" / "mcp_risk" / "corpus"
RESERVED_FILE = REPO_ROOT.parent / "shared" / "RESERVED_SERVERS.md"
LIVE_TOOLS = Path("livemcpbench") / "tools" / "LiveMCPTool" / "tools.json"

MUTATIONS = ("read", "local_write", "destructive")
FLAGS = ("public_sink", "secret_source", "untrusted_content", "execution", "money")
FIELDS = {"server", "tool", "source", "mutation", *FLAGS, "note"}
SOURCE = re.compile(r"^(livemcpbench|(npm|pypi):(@[^@/\s]+/)?[^@\s]+@[^@\s]+)$")


def _labels() -> list[dict]:
    lines = (CORPUS / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _servers() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((CORPUS / "servers").glob("*.json"))}


def _packages() -> list[dict]:
    return json.loads((CORPUS / "packages.json").read_text(encoding="utf-8"))["packages"]


def _reserved() -> set[str]:
    if not RESERVED_FILE.is_file():
        pytest.skip(f"the reserved-server list is not present at {RESERVED_FILE}")
    names = re.findall(r"^\s*[-*]\s*`([^`]+)`", RESERVED_FILE.read_text(encoding="utf-8"), flags=re.M)
    assert names, f"no package names found in {RESERVED_FILE}"
    return set(names)


def _bare(token: str) -> str:
    """A package token without its version: `@scope/name@1.2` -> `@scope/name`, `name==1.2` -> `name`."""
    if token.startswith("@"):
        i = token.find("@", 1)
        return token if i < 0 else token[:i]
    return re.split(r"@|==", token)[0]


def test_label_lines_have_the_fields_and_valid_values():
    labels = _labels()
    assert labels
    for i, lab in enumerate(labels, 1):
        assert set(lab) == FIELDS, (i, set(lab) ^ FIELDS)
        assert lab["mutation"] in MUTATIONS, (i, lab["mutation"])
        for f in FLAGS:
            assert isinstance(lab[f], bool), (i, f, lab[f])
        assert isinstance(lab["note"], str)
        assert isinstance(lab["server"], str) and lab["server"]
        assert isinstance(lab["tool"], str) and lab["tool"]
        assert SOURCE.match(lab["source"]), (i, lab["source"])
        assert "must_confirm" not in lab


def test_no_duplicate_server_tool():
    dup = [k for k, n in Counter((lab["server"], lab["tool"]) for lab in _labels()).items() if n > 1]
    assert not dup, dup[:10]


def test_every_gathered_tool_is_labelled_with_its_provenance():
    labels = _labels()
    by_server: dict[str, dict[str, dict]] = {}
    for lab in labels:
        by_server.setdefault(lab["server"], {})[lab["tool"]] = lab
    gathered_names = set()
    for slug, doc in _servers().items():
        assert set(doc) >= {"server", "package", "version", "gathered", "tools"}, slug
        assert doc["gathered"] == "tools/list of the running server", slug
        assert re.match(r"^(npm|pypi):\S+$", doc["package"]), slug
        assert doc["tools"], slug
        server = doc["server"]
        assert server not in gathered_names, f"two gathered files name server {server}"
        gathered_names.add(server)
        names = [t["name"] for t in doc["tools"]]
        assert len(names) == len(set(names)), f"{slug}: duplicate tool names"
        for t in doc["tools"]:
            assert isinstance(t.get("name"), str) and "inputSchema" in t, (slug, t.get("name"))
        labelled = by_server.get(server, {})
        assert set(labelled) == set(names), (slug, sorted(set(names) ^ set(labelled))[:10])
        for lab in labelled.values():
            assert lab["source"] == f"{doc['package']}@{doc['version']}", (slug, lab["tool"], lab["source"])
    orphans = {lab["server"] for lab in labels if lab["source"] != "livemcpbench"} - gathered_names
    assert not orphans, f"labels from packages with no servers/<slug>.json: {sorted(orphans)}"


def test_gathered_servers_match_the_package_list():
    packages = {e["slug"]: e for e in _packages()}
    assert len(packages) == len(_packages()), "duplicate slugs in packages.json"
    for slug, doc in _servers().items():
        assert slug in packages, f"servers/{slug}.json has no entry in packages.json"
        entry = packages[slug]
        assert not entry.get("skip"), f"{slug} is marked skip but was gathered"
        assert (entry["package"], entry["version"]) == (doc["package"], doc["version"]), slug


def test_no_reserved_package_anywhere():
    reserved = _reserved()
    for e in _packages():
        assert e["package"].split(":", 1)[1] not in reserved, e["package"]
    for slug, doc in _servers().items():
        assert doc["package"].split(":", 1)[1] not in reserved, slug
    for lab in _labels():
        if lab["source"] != "livemcpbench":
            assert _bare(lab["source"].split(":", 1)[1]) not in reserved, lab["source"]


def test_corpus_size():
    labels = _labels()
    servers = {(lab["source"] == "livemcpbench", lab["server"]) for lab in labels}
    assert len(labels) >= 1500 and len(servers) >= 80, (len(labels), len(servers))


@pytest.mark.realdata
def test_livemcpbench_labels_match_the_benchmark(real_data_dir):
    path = Path(real_data_dir) / LIVE_TOOLS
    if not path.is_file():
        pytest.skip(f"LiveMCPBench's tools.json is not under the data dir ({path})")
    reserved = _reserved()
    present: dict[str, set[str]] = {}
    reserved_servers: set[str] = set()
    for entry in json.loads(path.read_text(encoding="utf-8")):
        tokens = {_bare(a) for cfg in entry["config"]["mcpServers"].values() for a in cfg.get("args", [])}
        for key, srv in entry["tools"].items():
            present.setdefault(key, set()).update(t["name"] for t in srv["tools"])
            if tokens & reserved:
                reserved_servers.add(key)
    live = [lab for lab in _labels() if lab["source"] == "livemcpbench"]
    for lab in live:
        assert lab["server"] in present, lab["server"]
        assert lab["tool"] in present[lab["server"]], (lab["server"], lab["tool"])
        assert lab["server"] not in reserved_servers, f"reserved package's server labelled: {lab['server']}"
    labelled = {(lab["server"], lab["tool"]) for lab in live}
    missing = [(s, t) for s, names in present.items() if s not in reserved_servers for t in names
               if (s, t) not in labelled]
    assert not missing, missing[:10]
