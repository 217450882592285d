"""Per-epoch checkpoints of a training run (orbax), resumable and refused when they do not match.

Layout of a run directory (always resolved to an absolute path)::

    <checkpoint_dir>/run.json        configuration, data hash, model index, status, epochs done
    <checkpoint_dir>/state/<epoch>/  orbax checkpoint after <epoch> completed epochs: stacked params,
                                     Adam state, best-so-far params/loss/epoch, loss curves

Usage::

    res = train_models(..., TrainRun(seeds, checkpoint_dir="/abs/ckpt/run1", run_meta={"encoder": "all-MiniLM-L6-v2"}))
    # killed? call the same line again: it resumes after the last completed epoch, bit-identically.
    # finished? the same call returns the saved result without training.
    res = riskrank_jax.model.train_store.load_trained("/abs/ckpt/run1")

The data identity in run.json is the caller's ``data_id`` when given (a hash of the training texts, labels,
splits and the encoder id: what the data *is*), else a hash of the arrays' bytes.

A directory that cannot serve the run is never a dead end: when its run.json records another configuration or
another data identity (stale), or when run.json is missing, truncated or of an unknown format, or the orbax
state cannot be restored (corrupt), ``RunStore.open`` renames it to ``<dir>.stale-<timestamp>``, logs one
warning line saying why and where it went, and the run trains from scratch. It is never mixed into a new run.
The saved state holds unpadded numpy arrays, so a run may resume on a different number of devices.

Why keyed by configuration and data identity: a checkpoint is reused only for the run that wrote it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from riskrank_jax.errors import CacheError, read_json_object

RUN_FILE = "run.json"
STATE_DIR = "state"
FORMAT = "riskrank-jax/train-run/1"

log = logging.getLogger(__name__)


def hash_arrays(*arrays) -> str:
    """sha256 (first 16 hex digits) over the dtype, shape and bytes of each array, in order."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _jsonable(x):
    return json.loads(json.dumps(x))


def diff_keys(saved, wanted, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two JSON-like trees."""
    if isinstance(saved, dict) and isinstance(wanted, dict):
        out = []
        for k in sorted(set(saved) | set(wanted), key=str):
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in saved or k not in wanted:
                out.append(key)
            else:
                out.extend(diff_keys(saved[k], wanted[k], key))
        return out
    return [] if saved == wanted else [prefix or "<root>"]


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True))
    os.replace(tmp, path)


class RunStore:
    """run.json plus an orbax CheckpointManager under one directory."""

    def __init__(self, directory, run_config: dict, data_hash: str):
        """data_hash: the run's data identity (the caller's data_id, or a hash of the arrays)."""
        self.directory = Path(directory).expanduser().resolve()
        self.run_file = self.directory / RUN_FILE
        self.run_config = _jsonable(run_config)
        self.data_hash = data_hash
        self._manager = None

    # -- state of the directory -------------------------------------------------------------
    def status(self) -> tuple[str, int]:
        """("new" | "partial" | "completed", epochs completed). Raises CacheError on any mismatch."""
        if not self.run_file.exists():
            if (self.directory / STATE_DIR).exists():
                raise CacheError(f"{self.directory}: holds a {STATE_DIR}/ checkpoint but no {RUN_FILE}")
            return "new", 0
        saved = read_run(self.directory)
        differing = diff_keys(saved.get("config"), self.run_config)
        if saved.get("data_hash") != self.data_hash:
            differing.append("data_hash")
        if differing:
            raise CacheError(f"{self.run_file}: checkpoint was written for another run; differing keys: {', '.join(differing)}")
        latest = self.latest_step()
        epochs = self.run_config["train_config"]["epochs"]
        if saved.get("status") == "completed":
            if latest != epochs:
                raise CacheError(f"{self.run_file}: marked completed but the last saved epoch is {latest}, not {epochs}")
            return "completed", epochs
        return "partial", int(latest or 0)

    def open(self, abstract: dict) -> tuple[str, int, dict | None]:
        """(status, epochs completed, saved state) of the directory, setting it aside when it cannot serve.

        status is "new" (start from scratch; the state is None), "partial" (resume after the returned
        epoch from the saved state) or "completed" (the saved state of the last epoch). A stale or corrupt
        directory is renamed by `set_aside` (one warning line) and reported as "new".
        """
        try:
            status, done = self.status()
            if status == "new" or done == 0:
                return "new", 0, None
            return status, done, self.restore(abstract, step=done)
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with the directory, never a dead end
            self.close()
            reason = str(exc) if isinstance(exc, CacheError) else f"{self.directory}: {type(exc).__name__}: {exc}"
            set_aside(self.directory, reason)
            return "new", 0, None

    def latest_step(self) -> int | None:
        if not (self.directory / STATE_DIR).exists():
            return None
        return self.manager().latest_step()

    def manager(self):
        if self._manager is None:
            ocp = _orbax()
            self._manager = ocp.CheckpointManager(
                self.directory / STATE_DIR, options=ocp.CheckpointManagerOptions(max_to_keep=2, create=True)
            )
        return self._manager

    # -- writing ------------------------------------------------------------------------------
    def _write_run(self, status: str, epochs_done: int) -> None:
        _write_json(
            self.run_file,
            {
                "format": FORMAT,
                "status": status,
                "epochs_done": int(epochs_done),
                "config": self.run_config,
                "data_hash": self.data_hash,
            },
        )

    def begin(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.run_file.exists():
            self._write_run("running", 0)

    def save_epoch(self, epochs_done: int, state: dict) -> None:
        """Save the host state after ``epochs_done`` epochs and wait until it is on disk."""
        ocp = _orbax()
        mgr = self.manager()
        mgr.save(int(epochs_done), args=ocp.args.StandardSave(state), force=True)
        mgr.wait_until_finished()
        self._write_run("running", epochs_done)

    def restore(self, abstract: dict, step: int | None = None) -> dict:
        """Restore a saved state against its abstract target (ShapeDtypeStruct leaves) as numpy."""
        ocp = _orbax()
        mgr = self.manager()
        step = mgr.latest_step() if step is None else step
        if step is None:
            raise CacheError(f"{self.directory / STATE_DIR}: no saved epoch to restore")
        try:
            return mgr.restore(step, args=ocp.args.StandardRestore(abstract))
        except Exception as exc:  # shape/structure mismatch or a damaged checkpoint
            raise CacheError(f"{self.directory / STATE_DIR / str(step)}: cannot restore the training state ({exc})") from exc

    def complete(self) -> None:
        self._write_run("completed", self.run_config["train_config"]["epochs"])
        self.close()

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
            self._manager = None


def _orbax():
    """The ``orbax.checkpoint`` module."""
    # deferred: orbax loads only for a run that keeps checkpoints, not with every import of the trainers
    import orbax.checkpoint as ocp

    return ocp


def set_aside(directory, reason: str) -> Path:
    """Rename a checkpoint directory to ``<dir>.stale-<YYYYmmdd-HHMMSS>[-i]`` and log one warning line."""
    directory = Path(directory)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = directory.with_name(f"{directory.name}.stale-{stamp}")
    i = 1
    while target.exists():
        target = directory.with_name(f"{directory.name}.stale-{stamp}-{i}")
        i += 1
    os.replace(directory, target)
    reason = " ".join(reason.split())  # one line, whatever the cause's message holds
    log.warning("checkpoint not reusable (%s); moved it to %s and training from scratch", reason, target)
    return target


def read_run(checkpoint_dir) -> dict:
    path = Path(checkpoint_dir).expanduser().resolve() / RUN_FILE
    saved = read_json_object(path, CacheError, "no such run file", f"a {FORMAT!r} run record")
    if saved.get("format") != FORMAT:
        raise CacheError(f"{path}: unknown format {saved.get('format')!r} (expected {FORMAT!r})")
    return saved


__all__ = ["RunStore", "read_run", "set_aside", "hash_arrays", "diff_keys", "RUN_FILE"]
