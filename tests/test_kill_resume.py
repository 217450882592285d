"""A sweep killed with SIGKILL at any stage and restarted finishes with the results of an uninterrupted run.

One chain of restarts over the same output, cache and checkpoint directories, each run killed at another stage:
while embedding, in the middle of saving a training epoch (injected: the save of epoch 2 is started and the
process kills itself before it is on disk), while training, while evaluating, while writing results; then
the checkpoint's run.json is truncated and the last run completes. Its results must equal an uninterrupted
run's exactly. A tiny random BERT and 2 epochs keep each run to seconds.
"""

from __future__ import annotations

import re
import signal

import pytest

from sweep_cli import compare_results, load_results, run_sweep, run_until, sweep_env

FAST = ["--benchmark", "demo", "--variants", "dense", "core", "core_graph", "--epochs", "2", "--no-bench"]
KILL_MID_SAVE_OF_EPOCH_2 = """
import os, signal
import orbax.checkpoint as ocp
from riskrank_jax.model import checkpoints
_save_epoch = checkpoints.RunStore.save_epoch
def save_epoch(self, epochs_done, state):
    if epochs_done < 2:
        return _save_epoch(self, epochs_done, state)
    self.manager().save(int(epochs_done), args=ocp.args.StandardSave(state), force=True)
    os.kill(os.getpid(), signal.SIGKILL)
checkpoints.RunStore.save_epoch = save_epoch
"""


def _args(encoder, root):
    return [*FAST, "--encoder", encoder, "--out", root / "out", "--cache-dir", root / "cache",
            "--checkpoint-dir", root / "ckpt"]


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("jax-cache")


@pytest.fixture(scope="module")
def uninterrupted(tiny_bert_dir, tmp_path_factory, jax_cache):
    root = tmp_path_factory.mktemp("straight")
    r = run_sweep(_args(tiny_bert_dir, root), sweep_env(jax_cache))
    assert r.returncode == 0, r.stderr[-3000:]
    return load_results(root / "out")


def _killed(rc: int, output: str, what: str) -> None:
    assert rc == -signal.SIGKILL, f"{what}: not killed (exit {rc})\n{output[-3000:]}"
    assert "Traceback" not in output and "error:" not in output, output[-3000:]


@pytest.mark.slow
def test_killed_at_every_stage_then_restarted_gives_the_uninterrupted_results(tiny_bert_dir, uninterrupted,
                                                                               tmp_path, jax_cache):
    args, env = _args(tiny_bert_dir, tmp_path), sweep_env(jax_cache)
    for marker in ("] embed (cached) ...", None, "] train core", "] evaluate test ...", "] write results to "):
        if marker is None:  # the save of epoch 2 begun, the process gone before it finished
            rc, output = run_until(args, env, None, prelude=KILL_MID_SAVE_OF_EPOCH_2)
            what = "mid-save of epoch 2"
            _killed(rc, output, what)
            assert "] train core" in output and "done in" not in output.split("] train core")[-1]
        else:
            rc, output = run_until(args, env, marker)
            _killed(rc, output, marker)
        if marker == "] evaluate test ...":  # this run finished training: resumed, or set aside and retrained
            for line in output.splitlines():
                if "not reusable" in line:
                    assert "training from scratch" in line, line
    assert not (tmp_path / "out" / "demo" / "results.json").exists()  # killed before results.json was written

    # a run.json cut short (a crash while it was written): one warning saying what happened and what was done
    run_files = list((tmp_path / "ckpt").rglob("run.json"))
    assert len(run_files) == 1
    text = run_files[0].read_text()
    run_files[0].write_text(text[: len(text) // 2])
    last = run_sweep(args, env)
    assert last.returncode == 0, last.stderr[-3000:]
    warnings = [line for line in last.stderr.splitlines() if "checkpoint not reusable" in line]
    assert len(warnings) == 1, last.stderr[-3000:]
    assert re.search(r"run\.json: not valid JSON, e\.g\. truncated by a crash .*; moved it to \S+\.stale-\S+ and "
                     r"training from scratch", warnings[0]), warnings[0]
    assert last.stdout.strip().splitlines()[-1].startswith(f"[demo] wrote {tmp_path / 'out' / 'demo'}/results.json")

    same = compare_results(uninterrupted, load_results(tmp_path / "out"), 0.0)
    assert same["compared"] > 100 and not same["differing"], same["differing"][:8]
    assert not same["only_before"] and not same["only_after"]


def test_rewriting_results_removes_the_old_results_json_first(uninterrupted, tmp_path, monkeypatch):
    """Killed while a rerun (--force) rewrites the figures: no results.json is left to vouch for them."""
    from riskrank_jax.experiments import report

    out = tmp_path / "demo"
    report.write_outputs(uninterrupted, out)
    assert load_results(tmp_path)["run_key"] == uninterrupted["run_key"]

    def killed_while_plotting(res, out_dir):
        (out_dir / "tradeoff.png").write_bytes(b"\x89PNG half a figure")
        raise SystemExit("killed")

    monkeypatch.setattr(report, "plot_figures", killed_while_plotting)
    with pytest.raises(SystemExit):
        report.write_outputs(uninterrupted, out)
    assert not (out / "results.json").exists() and (out / "tables.md").exists()
