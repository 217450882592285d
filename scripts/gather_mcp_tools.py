"""Gather the tool lists of published MCP servers for the labelled corpus (experiments/mcp_risk/corpus).

For each package in the packages file (default experiments/mcp_risk/corpus/packages.json) this installs the
pinned version into a scratch folder (npm: its own `--prefix`; PyPI: a virtual environment of its own, since
servers pin different `mcp` versions), starts the server over stdio with dummy credentials, asks `tools/list`
(following `nextCursor`) with the MCP Python SDK client, and writes `servers/<slug>.json`:

    {"server": ..., "package": "npm:NAME" | "pypi:NAME", "version": ..., "gathered": "tools/list of the running
     server", "tools": [the tool objects as tools/list returned them]}

Usage:
    python scripts/gather_mcp_tools.py                    # every package not yet gathered
    python scripts/gather_mcp_tools.py --only github,slack --force
    python scripts/gather_mcp_tools.py --install-only     # just install (e.g. in the background)

The scratch folder (default .mcp-gather/ at the repository root) is git-ignored. A failure (install, start,
timeout) is written to SCRATCH/failures.json and printed; nothing is written under servers/ for it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "experiments" / "mcp_risk" / "corpus"
GATHERED = "tools/list of the running server"

# Dummy values for the variables servers commonly require before they list their tools. None is a real secret.
DUMMY_ENV = {
    "API_KEY": "dummy-api-key",
    "ACCESS_TOKEN": "dummy-access-token",
    "NODE_NO_WARNINGS": "1",
    "NO_COLOR": "1",
    "PYTHONUNBUFFERED": "1",
    "AWS_ACCESS_KEY_ID": "AKIADUMMYDUMMYDUMMY0",
    "AWS_SECRET_ACCESS_KEY": "dummy-secret",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def load_packages(path: Path) -> list[dict]:
    entries = json.loads(path.read_text())["packages"]
    slugs = [e["slug"] for e in entries]
    dup = {s for s in slugs if slugs.count(s) > 1}
    if dup:
        raise SystemExit(f"duplicate slugs in {path}: {sorted(dup)}")
    return entries


def run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None, timeout: float = 900) -> None:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {res.returncode}: {(res.stderr or res.stdout)[-1500:]}")


def kind_and_name(entry: dict) -> tuple[str, str]:
    kind, _, name = entry["package"].partition(":")
    if kind not in ("npm", "pypi") or not name:
        raise ValueError(f"{entry['slug']}: package must be npm:NAME or pypi:NAME, got {entry['package']!r}")
    return kind, name


def find_python(version: str) -> str:
    """An interpreter of `version` (e.g. "3.12"): a pyenv build if there is one, else one on PATH, else ours."""
    for base in sorted((Path.home() / ".pyenv" / "versions").glob(f"{version}.*"), reverse=True):
        exe = base / "bin" / f"python{version}"
        if exe.exists():
            return str(exe)
    return shutil.which(f"python{version}") or sys.executable


def install(entry: dict, scratch: Path) -> Path:
    """Install one package; returns its prefix (npm) or venv (PyPI) folder. Idempotent via a marker file."""
    kind, name = kind_and_name(entry)
    where = scratch / kind / entry["slug"]
    marker = where / ".installed"
    spec = f"{name}@{entry['version']}" if kind == "npm" else f"{name}=={entry['version']}"
    stamp = " ".join([spec, *entry.get("extra", [])])
    if marker.exists() and marker.read_text() == stamp:
        return where
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    env = dict(os.environ, npm_config_cache=str(scratch / "npm-cache"), PUPPETEER_SKIP_DOWNLOAD="1",
               PUPPETEER_SKIP_CHROMIUM_DOWNLOAD="1", PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
    if kind == "npm":
        run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(where), spec, *entry.get("extra", [])],
            env=env)
    else:
        python = find_python(entry.get("python", "3.12"))
        uv = shutil.which("uv") or shutil.which("uv", path=str(scratch / "tools" / "bin"))
        if uv:
            env.update(UV_CACHE_DIR=str(scratch / "uv-cache"), UV_PYTHON_DOWNLOADS="never")
            if os.environ.get("PIP_CERT"):
                env.setdefault("SSL_CERT_FILE", os.environ["PIP_CERT"])
            run([uv, "venv", "-q", "--python", python, str(where / "venv")], env=env)
            run([uv, "pip", "install", "-q", "--python", str(where / "venv" / "bin" / "python"), spec,
                 *entry.get("extra", [])], env=env)
        else:
            run([python, "-m", "venv", str(where / "venv")], env=env)
            run([str(where / "venv" / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", spec,
                 *entry.get("extra", [])], env=env)
    marker.write_text(stamp)
    return where


def npm_bin(where: Path, name: str, entry: dict) -> Path:
    bin_dir = where / "node_modules" / ".bin"
    if entry.get("bin"):
        return bin_dir / entry["bin"]
    pkg = json.loads((where / "node_modules" / name / "package.json").read_text())
    b = pkg.get("bin")
    if isinstance(b, str):
        return bin_dir / name.split("/")[-1]
    if isinstance(b, dict) and len(b) >= 1:
        key = sorted(b)[0] if len(b) > 1 else next(iter(b))
        return bin_dir / key.split("/")[-1]  # npm links a bin named "@scope/x" as .bin/x
    main = pkg.get("main", "index.js")
    return where / "node_modules" / name / main


def command_for(entry: dict, where: Path, work: Path) -> tuple[str, list[str]]:
    kind, name = kind_and_name(entry)
    args = [a.replace("{SCRATCH}", str(where)).replace("{WORK}", str(work)) for a in entry.get("args", [])]
    if kind == "npm":
        exe = npm_bin(where, name, entry)
        if exe.suffix in (".js", ".mjs", ".cjs"):
            return "node", [str(exe), *args]
        return str(exe), args
    exe = where / "venv" / "bin" / entry.get("bin", name)
    if entry.get("module"):
        return str(where / "venv" / "bin" / "python"), ["-m", entry["module"], *args]
    return str(exe), args


async def list_tools(command: str, args: list[str], env: dict, cwd: Path, timeout: float, errlog) -> list[dict]:
    """Start the server, initialize, and page through tools/list. The tool objects are kept as the server sent
    them (a raw request, so a schema the SDK would reject, e.g. one without "type", still comes back)."""
    import anyio
    from pydantic import BaseModel, ConfigDict

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    class RawToolList(BaseModel):
        model_config = ConfigDict(extra="allow", populate_by_name=True)
        tools: list[dict]
        nextCursor: str | None = None

    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
    tools: list[dict] = []
    with anyio.fail_after(timeout):
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                cursor = None
                while True:
                    # The raw request: send_request would validate the result against the protocol's Tool
                    # model and drop the whole list over one tool the SDK rejects.
                    raw = await session._dispatcher.send_raw_request(  # noqa: SLF001
                        "tools/list", {"cursor": cursor} if cursor else None, {"timeout": timeout})
                    res = RawToolList.model_validate(raw)
                    tools += res.tools
                    cursor = res.nextCursor
                    if not cursor:
                        break
    return tools


def gather(entry: dict, scratch: Path, out_dir: Path, timeout: float) -> int:
    import anyio

    kind, name = kind_and_name(entry)
    where = install(entry, scratch)
    home = scratch / "home" / entry["slug"]
    work = scratch / "work" / entry["slug"]
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    for rel, text in entry.get("files", {}).items():  # dummy config files a server insists on reading
        (work / rel).write_text(text)
    command, args = command_for(entry, where, work)
    env = {**DUMMY_ENV, "HOME": str(home), "PATH": f"{Path(command).parent}:{os.environ.get('PATH', '')}",
           **{k: v.replace("{SCRATCH}", str(where)).replace("{WORK}", str(work)) for k, v in
              entry.get("env", {}).items()}}
    with open(scratch / "logs" / f"{entry['slug']}.stderr", "w") as errlog:
        tools = anyio.run(list_tools, command, args, env, work, timeout, errlog)
    if not tools:
        raise RuntimeError("tools/list returned no tools")
    doc = {"server": entry.get("server", entry["slug"]), "package": f"{kind}:{name}",
           "version": entry["version"], "gathered": GATHERED, "tools": tools}
    (out_dir / f"{entry['slug']}.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return len(tools)


def describe(exc: BaseException) -> str:
    """One line for an exception, the leaves of an exception group spelled out."""
    if isinstance(exc, BaseExceptionGroup):
        return " | ".join(describe(e) for e in exc.exceptions)
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", type=Path, default=CORPUS / "packages.json")
    ap.add_argument("--out", type=Path, default=CORPUS / "servers")
    ap.add_argument("--scratch", type=Path, default=ROOT / ".mcp-gather")
    ap.add_argument("--only", default="", help="comma-separated slugs")
    ap.add_argument("--force", action="store_true", help="gather again even if servers/<slug>.json exists")
    ap.add_argument("--install-only", action="store_true")
    ap.add_argument("--jobs", type=int, default=2, help="parallel installs")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds for start + initialize + tools/list")
    a = ap.parse_args(argv)
    import logging

    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # a server's non-JSON lines on stdout are its own business
    a.scratch, a.out = a.scratch.resolve(), a.out.resolve()
    entries = load_packages(a.packages)
    if a.only:
        want = set(a.only.split(","))
        entries = [e for e in entries if e["slug"] in want]
    entries = [e for e in entries if not e.get("skip")]
    if not a.force:
        entries = [e for e in entries if not (a.out / f"{e['slug']}.json").exists()]
    a.out.mkdir(parents=True, exist_ok=True)
    (a.scratch / "logs").mkdir(parents=True, exist_ok=True)
    failures: dict[str, str] = {}
    fail_path = a.scratch / "failures.json"
    if fail_path.exists():
        failures = json.loads(fail_path.read_text())

    def do(entry: dict) -> None:
        try:
            if a.install_only:
                install(entry, a.scratch)
                print(f"installed {entry['slug']}", flush=True)
            else:
                n = gather(entry, a.scratch, a.out, a.timeout)
                failures.pop(entry["slug"], None)
                print(f"{entry['slug']}: {n} tools", flush=True)
        except BaseException as exc:  # noqa: BLE001 - one server's failure must not stop the others
            msg = describe(exc)
            failures[entry["slug"]] = msg[-2000:]
            print(f"FAILED {entry['slug']}: {msg[-400:]}", flush=True)

    if a.install_only:
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            list(pool.map(do, entries))
    else:
        for e in entries:
            do(e)
    fail_path.write_text(json.dumps(failures, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
