"""Benchmarks side by side in worker processes (`--jobs`): the same results as one after another."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from riskrank_jax.experiments.jobs import run_in_workers, worker_cpus
from riskrank_jax.experiments.run import run_in_turn, run_side_by_side
from riskrank_jax.runtime.cpus import split_cpus
from test_sweep import BagOfWordsEncoder, tiny_benchmark, tiny_config

REPO = Path(__file__).resolve().parent.parent
# what a rerun may change: when and how fast it ran, and the memory of its process
VOLATILE = {"timings", "peak_rss_mb", "finished_at", "smoothing_throughput", "side_by_side"}


def test_one_at_a_time_keeps_progress_bars_on():
    # one worker at a time owns the terminal: its bars stay on; two at once turn them off (see above)
    assert [v for _, v in run_in_workers(os.getenv, ["RISKRANK_PROGRESS"], jobs=1)] == [None]


def test_workers_run_every_item_in_a_worker_process():
    # os.getenv(name) in the worker: the worker's initializer turned progress bars off there, not here
    out = dict(run_in_workers(os.getenv, ["RISKRANK_PROGRESS", "RISKRANK_NO_SUCH_VARIABLE"], jobs=2))
    assert out == {"RISKRANK_PROGRESS": "0", "RISKRANK_NO_SUCH_VARIABLE": None}
    assert os.environ.get("RISKRANK_PROGRESS") is None
    assert list(run_in_workers(abs, [], jobs=2)) == []
    with pytest.raises(ValueError):
        list(run_in_workers(abs, [1], jobs=0))


@pytest.mark.skipif(not os.path.exists("/proc/self") or sys.version_info < (3, 11),
                    reason="needs /proc (Linux) and Python >= 3.11 (a fresh worker per item)")
def test_each_item_gets_a_fresh_process():
    # os.readlink("/proc/self") is the pid of the process that reads it
    pids = [pid for _, pid in run_in_workers(os.readlink, ["/proc/self", "/proc/self"], jobs=1)]
    assert len(set(pids)) == 2 and str(os.getpid()) not in pids


def test_an_error_in_a_worker_is_raised():
    with pytest.raises(ValueError, match="invalid literal"):
        list(run_in_workers(int, ["12", "not a number"], jobs=2))


def _results(path):
    res = json.loads(path.read_text())
    return {k: v for k, v in res.items() if k not in VOLATILE}


@pytest.mark.slow
def test_side_by_side_equals_in_turn(tmp_path, capsys):
    tasks = []
    for name in ("tiny_a", "tiny_b"):
        cfg = tiny_config(tmp_path, name, seeds=(1,), eval__variants=("paper",), eval__smoothing_benchmark=False)
        bench = dataclasses.replace(tiny_benchmark(), name=name)
        tasks.append((cfg, dict(bench=bench, encoder=BagOfWordsEncoder(), force=True)))
    run_in_turn([(cfg, dict(kw, workdir=tmp_path / "in_turn")) for cfg, kw in tasks], None)
    capsys.readouterr()
    errors = run_side_by_side([(cfg, dict(kw, workdir=tmp_path / "side")) for cfg, kw in tasks], None, jobs=2)
    printed = capsys.readouterr().out
    assert errors == []
    for name in ("tiny_a", "tiny_b"):
        assert _results(tmp_path / "side" / name / "results.json") == _results(tmp_path / "in_turn" / name /
                                                                               "results.json")
        assert f"[{name}] wrote {tmp_path / 'side' / name}/results.json" in printed  # the worker's closing lines
        side = json.loads((tmp_path / "side" / name / "results.json").read_text())
        alone = json.loads((tmp_path / "in_turn" / name / "results.json").read_text())
        assert side["side_by_side"] is True and alone["side_by_side"] is False  # the CPU was shared: said so
        assert "the CPU busy with them too" in (tmp_path / "side" / name / "tables.md").read_text()
    # --jobs 1 with several benchmarks: one after another, each in a fresh worker process, not sharing the CPU
    assert run_side_by_side([(cfg, dict(kw, workdir=tmp_path / "turn")) for cfg, kw in tasks], None, jobs=1) == []
    assert "one after another, each in a fresh worker process" in capsys.readouterr().err
    for name in ("tiny_a", "tiny_b"):
        alone = json.loads((tmp_path / "turn" / name / "results.json").read_text())
        assert alone["side_by_side"] is False
        assert _results(tmp_path / "turn" / name / "results.json") == _results(tmp_path / "in_turn" / name /
                                                                               "results.json")


@pytest.mark.slow
def test_a_failing_benchmark_does_not_stop_the_others(tmp_path):
    good = tiny_config(tmp_path, seeds=(1,), eval__lambdas=(0.0,), train__epochs=1, risk_head__epochs=3,
                       eval__variants=("paper",), eval__smoothing_benchmark=False)
    kw = dict(workdir=tmp_path / "out", force=True)
    bad = tiny_config(tmp_path, "ultratool", data__data_dir=str(tmp_path / "no_such_data"), seeds=(1,),
                      eval__lambdas=(0.0,), train__epochs=1, eval__variants=("paper",))
    errors = run_side_by_side([(good, dict(kw, bench=tiny_benchmark(), encoder=BagOfWordsEncoder())),
                               (bad, dict(kw, encoder=BagOfWordsEncoder()))], None, jobs=2)
    assert len(errors) == 1 and errors[0].startswith("[ultratool] ") and "no_such_data" in errors[0]
    assert (tmp_path / "out" / "tiny" / "results.json").exists()
    assert not (tmp_path / "out" / "ultratool").exists()  # nothing half-written for the failed one


def test_cli_side_by_side_reports_each_benchmarks_error(tmp_path):
    # two benchmarks whose data is missing: both workers fail, each error is named, the exit status is 1
    r = subprocess.run([sys.executable, "-m", "riskrank_jax.sweep", "--benchmark", "ultratool", "sealtools",
                        "--jobs", "2", "--data-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "out"),
                        "--cache-dir", str(tmp_path / "cache"), "--checkpoint-dir", str(tmp_path / "ckpt")],
                       capture_output=True, text=True, cwd=REPO, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"})
    assert r.returncode == 1, r.stderr[-2000:]
    assert "2 at a time, each in a worker process" in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert sorted(e.split("]")[0] for e in errors) == ["error: [sealtools", "error: [ultratool"]
    assert all(str(tmp_path / "missing") in e for e in errors), errors
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_split_cpus():
    assert split_cpus([0, 1], 2) == [[0], [1]]
    assert split_cpus([3, 0, 1, 2, 4], 2) == [[0, 1, 2], [3, 4]]  # sorted, contiguous, the first one larger
    assert split_cpus(range(16), 1) == [list(range(16))]
    with pytest.raises(ValueError, match="3 non-empty"):
        split_cpus([0, 1], 3)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity (Linux) and at least 2 usable CPUs")
def test_each_worker_runs_on_its_own_cpus():
    # the worker reads its own affinity mask: the two slots have disjoint shares that cover this process's CPUs
    mine = os.sched_getaffinity(0)
    assert worker_cpus(2) == split_cpus(mine, 2)
    seen = [cpus for _, cpus in run_in_workers(_affinity, [0, 1], jobs=2)]
    assert seen[0] & seen[1] == set() and seen[0] | seen[1] == mine
    assert os.sched_getaffinity(0) == mine  # this process is not pinned
    assert worker_cpus(len(mine) + 1) == [None] * (len(mine) + 1)  # more slots than CPUs: no pinning


def _affinity(_):
    return os.sched_getaffinity(0)
