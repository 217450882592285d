"""`riskrank-jax fit --tune-encoder` killed with SIGKILL in the middle of its tuning run, then run again with the
same command, resumes the run at its last saved step and saves the ranker an uninterrupted run saves.

Through the real process boundary: each fit is `python -c "<prelude>; main([...])"` (the console script's
entry point, riskrank_jax.cli.main:main). The world is tests/test_fit_tune.py's (the tiny random BERT, a 16-tool
MCP registry, the 200-request "alias" log, which the tuned encoder wins), tuned for 20 one-step epochs with a
save point every 5 steps (``--tune-set checkpoint_every=5``). The prelude of the killed run SIGKILLs the process
right after the save point of step 10 of the held-out tuning run is on disk (orbax state waited for, run.json
written); every run's prelude also reports, per tuning run, the steps its training loop covered and how many
steps it executed. What it proves:

(a) the rerun resumes at step 10, not 0: fit's stderr says "resuming tuning run KEY/heldout-seed0 at step 10
    of 20", and the tuner's loop of that run covers steps 10..20, executing 10 steps (the uninterrupted run: 20);
(b) the rerun's saved ranker is the uninterrupted run's bit for bit: the tuned encoder's weights
    (model.safetensors), the tool vectors, the encoder id, and the printed report's held-out figures.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from safetensors.numpy import load_file

from riskrank_jax.rank.ranker import Ranker
from riskrank_jax.rank.ranker_store import read_manifest
from sweep_cli import REPO, TIMEOUT_S, sweep_env
from test_fit_tune import _write_world

EPOCHS, EVERY, KILL_AT = 20, 5, 10  # one step per epoch (batch 128 > the 160 training requests): 20 steps
# test_fit_tune.CLI_TUNE with 20 tuning epochs instead of 100 and a save point every 5 steps
CLI_TUNE = ("--seeds", "0", "--epochs", "1", "--tune-encoder", "--tune-layers", "1", "--tune-epochs", str(EPOCHS),
            "--tune-set", "batch_size=128", "--tune-set", "lr=1e-2", "--tune-set", f"checkpoint_every={EVERY}")

# every run: one stderr line per tuning run saying which steps its loop covered and how many it executed
# (printed when the loop returns; a killed run prints none for the run it was killed in)
COUNT_STEPS = """
import sys
from pathlib import Path
from riskrank_jax.model import checkpoints, encoder_tune
_open, _train, _compiled = checkpoints.RunStore.open, encoder_tune.train_and_evaluate, encoder_tune.compiled_step
resumed_at, calls = {}, [0]
def opened(self, abstract):
    out = _open(self, abstract)
    resumed_at[self.directory.name] = out[1]
    return out
def compiled(*a, **k):
    step = _compiled(*a, **k)
    def counted(*b, **kw):
        calls[0] += 1
        return step(*b, **kw)
    return counted
def train(encoder, data, jobs, config, plan, **kw):
    calls[0] = 0
    out = _train(encoder, data, jobs, config, plan, **kw)
    name = Path(kw["checkpoint_dir"]).name
    print(f"loop of {name}: steps {resumed_at[name]}..{int(plan.lengths.max())}, {calls[0]} executed",
          file=sys.stderr, flush=True)
    return out
checkpoints.RunStore.open, encoder_tune.train_and_evaluate, encoder_tune.compiled_step = opened, train, compiled
"""
# the killed run: SIGKILL right after the save point of step KILL_AT of the held-out run is on disk
KILL_AFTER_SAVE = COUNT_STEPS + f"""
import os, signal
from riskrank_jax.model import checkpoints
_save_epoch = checkpoints.RunStore.save_epoch
def save_epoch(self, epochs_done, state):
    _save_epoch(self, epochs_done, state)  # returns once the orbax state is on disk and run.json written
    if self.directory.name == "heldout-seed0" and epochs_done == {KILL_AT}:
        os.kill(os.getpid(), signal.SIGKILL)
checkpoints.RunStore.save_epoch = save_epoch
"""


def _fit_cmd(args, prelude: str) -> list[str]:
    code = prelude + "\nimport sys\nfrom riskrank_jax.cli.main import main\nmain(sys.argv[1:])\n"
    return [sys.executable, "-c", code, "fit", *map(str, args)]


def _fit(args, env, prelude: str = COUNT_STEPS) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one fit process, run to its end (or its death)."""
    p = subprocess.Popen(_fit_cmd(args, prelude), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=REPO)
    watchdog = threading.Timer(TIMEOUT_S, p.kill)
    watchdog.start()
    try:
        out, err = p.communicate()
    finally:
        watchdog.cancel()
    return p.returncode, out, err


def _args(world, root) -> list:
    return [world["tools"], "--queries", world["root"] / "alias.jsonl", "--out", root / "model", "--encoder",
            world["encoder"], "--cache-dir", root / "cache", "--checkpoint-dir", root / "fit-runs", *CLI_TUNE]


def _loops(err: str) -> list[str]:
    return re.findall(r"^loop of (.*)$", err, re.M)


def _report(out: str) -> list[str]:
    """fit's printed report without its wall times ("(7 s per seed)") and the line naming the output directory."""
    return [re.sub(r" \(\d+ s per seed\)", "", line) for line in out.splitlines() if not line.startswith("saved ")]


@pytest.mark.slow
def test_a_fit_killed_mid_tuning_resumes_at_its_saved_step_and_saves_the_uninterrupted_ranker(
        tiny_bert_dir, tmp_path, report_line):
    (tmp_path / "world").mkdir()
    world = _write_world(tmp_path / "world", tiny_bert_dir)
    env = sweep_env(tmp_path / "jax-cache")  # the first run's compiled programs serve the other two

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    rc, out_straight, err = _fit(_args(world, straight), env)
    assert rc == 0, err[-3000:]
    assert _loops(err) == [f"heldout-seed0: steps 0..{EPOCHS}, {EPOCHS} executed",
                           f"all-seed0: steps 0..{EPOCHS}, {EPOCHS} executed"], err[-3000:]
    assert "fit: " not in err  # nothing on disk to resume or reuse
    assert "chosen: tuned-encoder" in out_straight  # the ranker carries a tuned encoder to compare

    rc, out, err = _fit(_args(world, resumed), env, KILL_AFTER_SAVE)
    assert rc == -signal.SIGKILL, f"not killed (exit {rc})\n{err[-3000:]}"
    assert "Traceback" not in err and not _loops(err) and not out, err[-3000:]  # killed inside the held-out run
    (key,) = (resumed / "fit-runs").iterdir()
    run_dir = key / "heldout-seed0"
    assert [p.name for p in key.iterdir()] == ["heldout-seed0"]
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["status"] == "running" and saved["epochs_done"] == KILL_AT
    on_disk = sorted(int(p.name) for p in (run_dir / "state").iterdir() if p.name.isdigit())
    assert on_disk == [KILL_AT - EVERY, KILL_AT]  # orbax keeps the last two save points

    rc, out_resumed, err = _fit(_args(world, resumed), env)
    assert rc == 0, err[-3000:]
    # (a) resumed at the saved step, not step 0: fit says so, and the tuner's loop ran only the steps left
    assert f"fit: resuming tuning run {key.name}/heldout-seed0 at step {KILL_AT} of {EPOCHS}\n" in err, err[-3000:]
    assert _loops(err) == [f"heldout-seed0: steps {KILL_AT}..{EPOCHS}, {EPOCHS - KILL_AT} executed",
                           f"all-seed0: steps 0..{EPOCHS}, {EPOCHS} executed"], err[-3000:]

    # (b) the same saved ranker as the uninterrupted run's, bit for bit
    assert _report(out_resumed) == _report(out_straight), (out_resumed, out_straight)
    a, b = straight / "model", resumed / "model"
    weights_a, weights_b = (load_file(str(d / "encoder" / "model.safetensors")) for d in (a, b))
    assert sorted(weights_a) == sorted(weights_b)
    weight_diff = max(float(np.abs(weights_a[k] - weights_b[k]).max()) for k in weights_a)
    ra, rb = Ranker.load(a), Ranker.load(b)
    vector_diff = float(np.abs(ra.tool_emb - rb.tool_emb).max())
    assert weight_diff == 0.0 and vector_diff == 0.0, (weight_diff, vector_diff)
    assert ra.encoder_id == rb.encoder_id and ra.tool_names == rb.tool_names
    fit_a, fit_b = (read_manifest(d)["provenance"]["fit"] for d in (a, b))
    assert {k: v for k, v in fit_a.items() if k != "seconds"} == {
        k: v for k, v in fit_b.items() if k != "seconds"}
    tune_a, tune_b = (json.loads((d / "encoder" / "riskrank_tune.json").read_text()) for d in (a, b))
    assert tune_a.pop("seconds") >= 0 and tune_b.pop("seconds") >= 0 and tune_a == tune_b
    report_line(f"fit --tune-encoder killed after the save of step {KILL_AT} of {EPOCHS}, resumed at step {KILL_AT} "
                f"({EPOCHS - KILL_AT} steps run); max |difference| from the uninterrupted run: weights {weight_diff}, "
                f"tool vectors {vector_diff}")
