"""Whole-sweep wall time and peak memory against the targets, each sweep in a fresh process.

Runs (each a subprocess of ``python -m riskrank_jax.sweep`` under ``/usr/bin/time -v``):

  serial   ``--benchmark all --force --jobs 1`` from the embedding cache you already have, with a new empty
           checkpoint directory (so every model is trained: only the encoding is skipped) and a new empty XLA
           compilation cache (so every program is compiled): the benchmarks one after another in one process.
  cached   the same with the default ``--jobs`` (two benchmarks side by side on a CPU with 2+ cores), its own
           empty compilation cache.  Target: ``TARGETS_S["cached"]`` wall.
  rerun    the same again with the compilation cache ``cached`` filled (what a second sweep costs); needs
           ``cached`` before it in the same invocation.
  empty    the paper's rows (``--variants paper``) of UltraTool and Seal-Tools in one process
           (``--benchmark ultratool sealtools``), from a new EMPTY embedding cache (and so compilation cache)
           and checkpoint directory (encoding included).  Target: ``TARGETS_S["empty"]`` wall.

For each it prints wall seconds, the ratio target / wall (>= 1 meets the target), the peak RSS of the whole
process tree (the sweep and its worker processes added up, sampled every ``TREE_SAMPLE_S``; target <= 3 GiB),
the largest single process's (``Maximum resident set size``) and each benchmark's stage timings and peak RSS from
its results.json.  Measure on a quiet machine: the script prints the load average before and after each run.

    python benchmarks/sweep_time.py [--runs serial cached rerun empty] [--work DIR] [--json FILE] [--update-reference]

``--update-reference`` makes the serial run write the committed results under experiments/results/ (for
maintainers refreshing the committed timings); otherwise everything goes under --work (default: a new
temporary directory, removed at the end unless --keep).

Why each run is a fresh process under ``/usr/bin/time -v``: wall time and peak RSS are what a user's sweep
costs, caches included, and a machine's speed drifts over hours, so compare figures from one invocation.
Figures: docs/performance.md, "Whole sweeps" and "Memory".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS_S = {"serial": 300.0, "cached": 300.0, "rerun": 300.0, "empty": 240.0}
RSS_TARGET_MIB = 3 * 1024


TREE_SAMPLE_S = 0.25  # how often the process tree's RSS is summed


def _tree_rss_kib(root: int) -> int:
    """Resident KiB of process ``root`` and all its descendants now (Linux /proc; 0 where it cannot be read)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "status").read_text().splitlines()
        except OSError:  # the process ended while being read
            continue
        info = dict(line.split(":", 1) for line in fields if ":" in line)
        pid = int(entry.name)
        children.setdefault(int(info.get("PPid", "0").split()[0]), []).append(pid)
        rss[pid] = int(info["VmRSS"].split()[0]) if "VmRSS" in info else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def _timed_sweep(args: list[str], env: dict, log: Path) -> dict:
    """Run one sweep under /usr/bin/time -v; {"wall_s", "max_rss_mib" (the largest single process),
    "tree_peak_rss_mib" (the sweep's processes added up, sampled), "rc"}."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "riskrank_jax.sweep", *args]
    t0, tree_peak = time.perf_counter(), 0
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            tree_peak = max(tree_peak, _tree_rss_kib(proc.pid))
            time.sleep(TREE_SAMPLE_S)
        rc = proc.returncode
    wall = time.perf_counter() - t0
    text = log.read_text()
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return {"wall_s": round(wall, 1), "max_rss_mib": round(int(m.group(1)) / 1024, 1) if m else None,
            "tree_peak_rss_mib": round(tree_peak / 1024, 1), "rc": rc}


def _stages(results_dir: Path) -> dict:
    """{benchmark: {"timings": ..., "peak_rss_mb": ...}} from each results.json under results_dir."""
    out = {}
    for f in sorted(results_dir.glob("*/results.json")):
        r = json.loads(f.read_text())
        out[f.parent.name] = {"timings": r.get("timings", {}), "peak_rss_mb": r.get("peak_rss_mb", {}),
                              "side_by_side": bool(r.get("side_by_side", False))}
    return out


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _env(**extra) -> dict:
    """This process's environment without a JAX compilation cache of the user's, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_cached(work: Path, update_reference: bool, name: str = "cached") -> dict:
    """``--benchmark all --force`` with the user's embedding cache, a new checkpoint directory and the XLA
    compilation cache ``work/xla`` (``work/xla_serial`` for "serial"): empty for "cached" and "serial", filled by
    the "cached" run before it for "rerun". "serial" adds ``--jobs 1``."""
    out = work / f"runs_{name}"
    args = ["--benchmark", "all", "--force", "--checkpoint-dir", str(work / f"ckpt_{name}")]
    args += ["--update-reference"] if update_reference else ["--out", str(out)]
    if name == "serial":  # the only run that may write the committed results: measured with no benchmark beside it
        args += ["--jobs", "1"]
    xla = work / ("xla_serial" if name == "serial" else "xla")
    res = _timed_sweep(args, _env(JAX_COMPILATION_CACHE_DIR=xla), work / f"{name}.log")
    res["stages"] = _stages(ROOT / "experiments" / "results" if update_reference else out)
    return res


def run_empty(work: Path) -> dict:
    """The paper's rows of UltraTool and Seal-Tools in one process, from a new empty embedding cache (and so an
    empty compilation cache, which lives under it) and checkpoint directory."""
    env = _env(RISKRANK_CACHE=work / "cache_empty")
    args = ["--benchmark", "ultratool", "sealtools", "--variants", "paper", "--force", "--no-bench",
            "--out", str(work / "runs_empty"), "--checkpoint-dir", str(work / "ckpt_empty")]
    res = _timed_sweep(args, env, work / "empty.log")
    res["stages"] = _stages(work / "runs_empty")
    return res


def report(name: str, res: dict) -> None:
    target = TARGETS_S[name]
    ok = "meets" if res["wall_s"] <= target else "misses"
    print(f"\n[{name}] wall {res['wall_s']:.1f} s (target {target:.0f} s, ratio {target / res['wall_s']:.2f}x, {ok}); "
          f"peak RSS of the process tree {res['tree_peak_rss_mib']} MiB (target {RSS_TARGET_MIB} MiB; the largest "
          f"single process {res['max_rss_mib']} MiB); exit {res['rc']}")
    peaks = []
    for bench, st in res["stages"].items():
        print(f"  {bench}: " + ", ".join(f"{k} {v:.1f} s" for k, v in st["timings"].items()))
        peaks.append(max(st["peak_rss_mb"].values(), default=0.0))
        print(f"  {bench}: peak RSS over stages {peaks[-1]:.0f} MiB")
    if any(st["side_by_side"] for st in res["stages"].values()):  # one process each: time -v shows the largest
        print(f"  benchmarks side by side: at most {sum(peaks):.0f} MiB at once (the sum of their processes' peaks)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", choices=list(TARGETS_S), default=["cached", "rerun", "empty"],
                    help="'rerun' repeats 'cached' with the compiled programs 'cached' left in the compilation "
                         "cache, so it needs 'cached' before it in the same invocation")
    ap.add_argument("--work", type=Path, default=None, help="working directory (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--update-reference", action="store_true",
                    help="the serial run writes experiments/results/ (refreshes the committed results and timings, "
                         "measured with no other benchmark beside them)")
    args = ap.parse_args()
    if args.update_reference and "serial" not in args.runs:
        ap.error("--update-reference writes the serial run's results: add serial to --runs")
    if "rerun" in args.runs and ("cached" not in args.runs or args.runs.index("rerun") < args.runs.index("cached")):
        ap.error("--runs rerun needs cached before it (it reuses the programs cached compiled)")
    work = args.work or Path(tempfile.mkdtemp(prefix="riskrank-sweep-time-"))
    work.mkdir(parents=True, exist_ok=True)
    figures = {"cpus": os.cpu_count(), "runs": {}}
    try:
        for name in args.runs:
            before = _loadavg()
            if name == "empty":
                res = run_empty(work)
            else:  # only the serial (one process, compile-cache-cold) run may write the committed results
                res = run_cached(work, args.update_reference and name == "serial", name)
            res["loadavg_before"], res["loadavg_after"] = before, _loadavg()
            figures["runs"][name] = res
            report(name, res)
            print(f"  load average before {before}, after {res['loadavg_after']}; log under {work}")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
