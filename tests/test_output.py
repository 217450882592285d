"""Clean output: no library DEBUG/INFO lines under a DEBUG root logger, no progress bars off a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from riskrank_jax.runtime.progress import progress_bar

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
import numpy as np
from riskrank_jax.retrieve import baselines as retrievers
from riskrank_jax.model.train import TrainRun, train_models
from riskrank_jax.model.train_config import TrainConfig
s = retrievers.bm25_scores(["delete a file", "read a file", "send an email"], ["remove file", "mail"])
assert s.shape == (2, 3) and s[0, 0] > 0
rng = np.random.default_rng(0)
t = rng.standard_normal((20, 8)).astype(np.float32)
q = rng.standard_normal((6, 8)).astype(np.float32)
gold = np.array([[i % 20, -1] for i in range(6)])
train_models(t, q, gold, rng.integers(1, 6, 20), np.ones((1, 6), bool), TrainConfig(epochs=2, batch_size=8, hidden=4),
             TrainRun((1,), checkpoint_dir=sys.argv[1], progress=True))
logging.getLogger("riskrank_jax.test").debug("own debug line")
print("finished")
"""


def test_no_library_debug_lines_and_no_bar_off_a_terminal(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), JAX_PLATFORMS="cpu")
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "ckpt")], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "finished"
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(("DEBUG:", "INFO:"))]
    assert lines == ["DEBUG:riskrank_jax.test:own debug line"], lines[:20]  # the root logger still works
    assert "\r" not in res.stderr and "it/s" not in res.stderr and "epoch" not in res.stderr


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    bar = progress_bar(range(3), enabled=True, desc="work")
    assert list(bar) == [0, 1, 2]
    bar.set_postfix(loss=1.0)
    bar.close()
    assert capsys.readouterr().err == ""  # pytest's captured stderr is not a terminal
    monkeypatch.setattr("riskrank_jax.runtime.progress.stderr_is_terminal", lambda: True)
    assert list(progress_bar(range(3), enabled=True, desc="work")) == [0, 1, 2]
    assert "work" in capsys.readouterr().err
    assert list(progress_bar(range(2), enabled=False, desc="off")) == [0, 1]
    assert "off" not in capsys.readouterr().err
