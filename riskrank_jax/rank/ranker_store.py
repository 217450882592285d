"""A saved ranker's directory: its manifest, its orbax arrays and, when it has one, its own tuned encoder.

    DIR/manifest.json   format, version, encoder id, registry fingerprint, config, tool names and texts, ...
    DIR/arrays/         orbax: tool embeddings, risk levels and scores, head params, graph, servers
    DIR/encoder/        a fine-tuned encoder (``fit --tune-encoder``), a Hugging Face BERT directory

``rank.ranker.Ranker.save`` / ``Ranker.load`` say what goes in (the arrays and the manifest's fields); this module
writes and reads the directory, whole or not at all, and refuses another format, encoder or registry.

Why apart from the Ranker: the file format is one idea, the ranking another.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from riskrank_jax.encode.encoder import load_encoder_lazily
from riskrank_jax.errors import RankerError, read_json_object

FORMAT = "riskrank-jax/ranker"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAYS = "arrays"
ENCODER_DIR = "encoder"  # a ranker's own (fine-tuned) encoder, a Hugging Face BERT directory inside its directory
TUNE_META = "riskrank_tune.json"  # what model.encoder_tune.save_tuned_encoder writes beside a tuned encoder


def tuned_encoder_dir(encoder, encoder_id: str) -> Path | None:
    """The directory of a ranker's own encoder when it is a fine-tuned one (``fit --tune-encoder``: it holds
    riskrank_tune.json and its model id is the ranker's ``encoder_id``), else None."""
    src = getattr(encoder, "model_dir", None) or getattr(encoder, "name_or_path", None)
    if src is None or getattr(encoder, "model_id", None) != encoder_id:
        return None
    src = Path(src).expanduser().resolve()
    return src if (src / TUNE_META).is_file() else None


def save(directory, tree: dict, manifest: dict, tuned_encoder: Path | None) -> Path:
    """Write ``tree`` to <directory>/arrays (orbax), ``manifest`` (with the format and version) to
    <directory>/manifest.json, and copy ``tuned_encoder`` to <directory>/encoder (a stale one is removed when
    there is none); returns the directory."""
    # deferred: orbax takes about a second to import and only saving or loading a ranker needs it
    import orbax.checkpoint as ocp

    d = Path(directory).expanduser().resolve()
    d.mkdir(parents=True, exist_ok=True)
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(d / ARRAYS, tree, force=True)
    ckpt.wait_until_finished()
    tuned = _save_encoder_dir(tuned_encoder, d)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, **manifest,
                **({"encoder_dir": ENCODER_DIR} if tuned else {})}
    tmp = d / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, d / MANIFEST)
    return d


def open_saved(directory, expect_encoder_id: str | None = None, expect_registry_fingerprint: str | None = None):
    """(directory, manifest, restored arrays, its own encoder or None) of a saved ranker; RankerError for another
    format, an encoder or registry other than expected, or missing or damaged arrays.

    A ranker saved with its own tuned encoder accepts as ``expect_encoder_id`` the tuned encoder's id or the id
    of the encoder it was tuned from; the encoder comes back lazily loaded."""
    # deferred: orbax takes about a second to import and only saving or loading a ranker needs it
    import orbax.checkpoint as ocp

    d = Path(directory).expanduser().resolve()
    m = read_manifest(d)
    tuned = _saved_encoder(d, m)
    accepted = {m["encoder_id"]} if tuned is None else {m["encoder_id"], tuned[1]}
    if expect_encoder_id is not None and expect_encoder_id not in accepted:
        built = (f"built with encoder {m['encoder_id']!r}" if tuned is None else
                 f"built with its own encoder {d / ENCODER_DIR}, tuned from encoder {tuned[1]!r}")
        raise RankerError(f"{d / MANIFEST}: ranker was {built}, but the caller embeds with "
                          f"{expect_encoder_id!r}; its scores would be meaningless")
    if expect_registry_fingerprint is not None and m["registry_fingerprint"] != expect_registry_fingerprint:
        raise RankerError(f"{d / MANIFEST}: ranker was built for registry {m['registry_fingerprint']}, not "
                          f"{expect_registry_fingerprint} (tool names, texts or risk levels differ)")
    try:
        tree = ocp.StandardCheckpointer().restore(d / ARRAYS)
    except Exception as e:  # missing or damaged arrays
        raise RankerError(f"{d / ARRAYS}: cannot read the ranker's arrays ({e})") from e
    return d, m, tree, None if tuned is None else tuned[0]


def read_manifest(directory: Path) -> dict:
    """The manifest of a saved ranker, checked for format and version."""
    path = Path(directory) / MANIFEST
    m = read_json_object(path, RankerError, "no saved ranker here (manifest missing)", "a ranker manifest")
    if m.get("format") != FORMAT or m.get("format_version") != FORMAT_VERSION:
        raise RankerError(f"{path}: format {m.get('format')!r} version {m.get('format_version')!r}; this "
                          f"riskrank-jax reads {FORMAT!r} version {FORMAT_VERSION}")
    return m


def saved_encoder_dir(directory) -> Path | None:
    """<directory>/encoder when the ranker saved there embeds with its own tuned encoder, else None."""
    d = Path(directory).expanduser().resolve()
    name = read_manifest(d).get("encoder_dir")
    return None if name is None else d / name


def _save_encoder_dir(src: Path | None, d: Path) -> bool:
    """Copy the tuned encoder directory ``src`` to d/encoder (whole or not at all); with no ``src``, remove a
    d/encoder left by an earlier save. True when d/encoder now holds the ranker's encoder."""
    dest = d / ENCODER_DIR
    if src is None:
        if (dest / TUNE_META).is_file():
            shutil.rmtree(dest)
        return False
    if src != dest:
        tmp = d / (ENCODER_DIR + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    return True


def _saved_encoder(d: Path, m: dict):
    """(the ranker's own encoder, loaded lazily; the id of the encoder it was tuned from), or None when the
    manifest names no encoder directory; RankerError when the directory is missing or is not that encoder."""
    name = m.get("encoder_dir")
    if name is None:
        return None
    path = d / name
    try:
        base = json.loads((path / TUNE_META).read_text())["base_encoder"]
        enc = load_encoder_lazily(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RankerError(f"{path}: cannot read the ranker's tuned encoder ({type(e).__name__}: {e})") from None
    if enc.model_id != m["encoder_id"]:
        raise RankerError(f"{path}: this encoder is {enc.model_id!r}, but the ranker was built with "
                          f"{m['encoder_id']!r} (damaged or replaced encoder directory?)")
    return enc, base


__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "ARRAYS", "ENCODER_DIR", "TUNE_META", "tuned_encoder_dir", "save",
           "open_saved", "read_manifest", "saved_encoder_dir"]
