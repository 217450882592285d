"""On-disk embedding cache: each unique text is encoded once per encoder, across tools, queries, splits and runs.

Layout (under `paths.resolve_cache_dir()`):

    embeddings/<safe model id>-<sha256(model_id)[:12]>/
        MODEL_ID.txt                    the full model id (for people; never read back as a key)
        shard-<ns>-<pid>-<rand>.npz     one per write: keys, vectors, model_id, checksum, format

- A key is sha256(text as UTF-8) in hex, stored as fixed-length bytes (dtype S64): the exact text, nothing
  normalised. The directory is chosen by the encoder's `model_id` (weights hash + pooling + max length +
  tokenizer hash), and each shard also stores that id, so another encoder or a changed text never reads a
  stale vector.
- Shards are plain `.npz` files read with `allow_pickle=False`. A new shard is written to a hidden temporary
  file, fsync'ed and renamed into place (`os.replace`), so readers never see a half-written shard.
- A shard that fails to load, or whose checksum (sha256 over model id, keys and vectors), shape, dtype or
  values (NaN/inf) are wrong, is reported with `warnings.warn` naming the file, deleted, and its texts are
  encoded again.
- When a model's directory holds more than `max_shards` shards, the ones this process has read are merged
  into one (new shards written meanwhile by other processes are left alone).

Why keyed by the exact text and the encoder id: a cached vector can never be stale or another model's.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from riskrank_jax.encode.tokenizer import check_texts
from riskrank_jax.errors import CacheError, RiskRankError
from riskrank_jax.paths import resolve_cache_dir

FORMAT = "riskrank-embcache-v1"
KEY_DTYPE = np.dtype("S64")
_SHARD_FIELDS = {"format", "model_id", "keys", "vectors", "checksum"}


class TextEncoder(Protocol):
    """What `embed_texts` needs from an encoder (riskrank_jax.encode.encoder.Encoder, or a test double)."""

    model_id: str
    dim: int

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool | None = None) -> np.ndarray: ...


def text_key(text: str) -> str:
    """Cache key of one text: sha256 of its exact UTF-8 bytes, 64 hex characters."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _checksum(model_id: str, keys: np.ndarray, vectors: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(FORMAT.encode())
    h.update(model_id.encode("utf-8"))
    h.update(str(vectors.shape).encode())
    h.update(np.ascontiguousarray(keys).tobytes())
    h.update(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
    return h.hexdigest()


def write_shard(path: Path, model_id: str, keys: np.ndarray, vectors: np.ndarray) -> Path:
    """Atomically write one shard file at `path` (temporary file, fsync, os.replace)."""
    keys = np.asarray(keys, dtype=KEY_DTYPE)
    vectors = np.ascontiguousarray(vectors, dtype="<f4")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(
                f,
                format=np.array(FORMAT),
                model_id=np.array(model_id),
                keys=keys,
                vectors=vectors,
                checksum=np.array(_checksum(model_id, keys, vectors)),
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:  # make the rename durable too (best effort; not all filesystems allow opening a directory)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path


def read_shard(path: Path, model_id: str, dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Load and verify one shard; raises CacheError saying what is wrong."""
    try:
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            if names != _SHARD_FIELDS:
                raise CacheError(f"fields {sorted(names)}, expected {sorted(_SHARD_FIELDS)}")
            fmt = str(z["format"])
            mid = str(z["model_id"])
            keys = z["keys"]
            vectors = z["vectors"]
            checksum = str(z["checksum"])
    except CacheError:
        raise
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001 - zip/npy errors of every kind mean "unreadable"
        raise CacheError(f"unreadable ({type(e).__name__}: {e})") from e
    if fmt != FORMAT:
        raise CacheError(f"format {fmt!r}, expected {FORMAT!r}")
    if mid != model_id:
        raise CacheError(f"written for model {mid!r}, not {model_id!r}")
    if keys.dtype != KEY_DTYPE or keys.ndim != 1:
        raise CacheError(f"keys have dtype {keys.dtype} and shape {keys.shape}, expected {KEY_DTYPE} [n]")
    if vectors.dtype != np.dtype("<f4") or vectors.ndim != 2 or vectors.shape[0] != keys.shape[0]:
        raise CacheError(f"vectors have dtype {vectors.dtype} and shape {vectors.shape} for {keys.shape[0]} keys")
    if dim is not None and vectors.shape[1] != dim:
        raise CacheError(f"vectors have dimension {vectors.shape[1]}, the encoder gives {dim}")
    if checksum != _checksum(model_id, keys, vectors):
        raise CacheError("checksum mismatch")
    if not np.all(np.isfinite(vectors)):
        raise CacheError("vectors contain NaN or inf")
    return keys, vectors


class _ModelTable:
    """In-memory view of one model's shards (re-scanned for new files on every lookup)."""

    def __init__(self, directory: Path, model_id: str):
        self.dir = directory
        self.model_id = model_id
        self.dim: int | None = None
        self.index: dict[bytes, tuple[int, int]] = {}
        self.blocks: list[np.ndarray] = []
        self.files: list[Path] = []  # shards read (and verified) by this process
        self.seen: set[str] = set()

    def refresh(self, dim: int | None) -> None:
        if dim is not None and self.dim is not None and dim != self.dim:
            raise CacheError(f"model {self.model_id!r}: cached vectors have dimension {self.dim}, encoder gives {dim}")
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("shard-*.npz")):
            if path.name in self.seen:
                continue
            self.seen.add(path.name)
            try:
                keys, vectors = read_shard(path, self.model_id, dim if dim is not None else self.dim)
            except FileNotFoundError:
                continue  # merged away by another process meanwhile
            except CacheError as e:
                warnings.warn(
                    f"embedding cache shard {path} is corrupt or stale ({e}); discarding it, its texts will be "
                    "encoded again",
                    RuntimeWarning,
                    stacklevel=4,
                )
                try:
                    path.unlink()
                except OSError:
                    pass
                continue
            self._add(keys, vectors)
            self.files.append(path)

    def _add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        b = len(self.blocks)
        self.blocks.append(vectors)
        for row, k in enumerate(keys.tolist()):
            self.index[k] = (b, row)


@dataclass
class EmbedStats:
    """What one `embed_texts` call did."""

    model_id: str
    n_texts: int = 0
    n_unique: int = 0
    hits: int = 0
    misses: int = 0
    seconds: float = 0.0
    encode_seconds: float = 0.0

    @property
    def texts_per_s(self) -> float:
        """Encoding throughput over the texts actually encoded (0 when none were)."""
        return self.misses / self.encode_seconds if self.misses and self.encode_seconds > 0 else 0.0

    def summary(self) -> str:
        rate = f"{self.texts_per_s:.1f} texts/s" if self.misses else "nothing to encode"
        return (
            f"encoded {self.misses} new texts, {self.hits} from cache ({self.n_texts} texts, {self.n_unique} unique), "
            f"{rate}, {self.seconds:.2f} s in all"
        )


def _safe_dir_name(model_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._")[:80]
    return f"{safe}-{hashlib.sha256(model_id.encode('utf-8')).hexdigest()[:12]}"


class EmbeddingCache:
    """Embedding vectors on disk, keyed by (encoder model_id, sha256 of the exact text)."""

    max_shards = 64

    def __init__(self, cache_dir: str | os.PathLike | None = None):
        self.root = resolve_cache_dir(cache_dir) / "embeddings"
        self._tables: dict[str, _ModelTable] = {}
        self.last_stats: EmbedStats | None = None

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.root)!r})"

    def model_dir(self, model_id: str) -> Path:
        return self.root / _safe_dir_name(model_id)

    def _table(self, model_id: str) -> _ModelTable:
        if model_id not in self._tables:
            self._tables[model_id] = _ModelTable(self.model_dir(model_id), model_id)
        return self._tables[model_id]

    def lookup(self, model_id: str, keys: Sequence[str], dim: int | None = None) -> dict[str, np.ndarray]:
        """The cached vectors among `keys` (hex text keys), as {key: float32 [dim]}."""
        t = self._table(model_id)
        t.refresh(dim)
        found = {}
        for k in keys:
            loc = t.index.get(k.encode("ascii"))
            if loc is not None:
                found[k] = t.blocks[loc[0]][loc[1]]
        return found

    def put(self, model_id: str, keys: Sequence[str], vectors: np.ndarray) -> Path | None:
        """Store vectors for `keys` in one new shard; returns its path (None when there is nothing to store)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(keys) == 0:
            return None
        if vectors.ndim != 2 or vectors.shape[0] != len(keys):
            raise CacheError(f"put(): {len(keys)} keys but vectors of shape {vectors.shape}")
        if not np.all(np.isfinite(vectors)):
            raise CacheError(f"put(): refusing to cache NaN/inf vectors for model {model_id!r}")
        t = self._table(model_id)
        if t.dim is not None and vectors.shape[1] != t.dim:
            raise CacheError(f"put(): vectors of dimension {vectors.shape[1]}, cached ones have {t.dim}")
        t.dir.mkdir(parents=True, exist_ok=True)
        label = t.dir / "MODEL_ID.txt"
        if not label.exists():
            label.write_text(model_id + "\n", encoding="utf-8")
        key_arr = np.array([k.encode("ascii") for k in keys], dtype=KEY_DTYPE)
        path = write_shard(t.dir / self._shard_name(), model_id, key_arr, vectors)
        t.seen.add(path.name)
        t._add(key_arr, np.ascontiguousarray(vectors))
        t.files.append(path)
        if len(t.files) > self.max_shards:
            self.compact(model_id)
        return path

    @staticmethod
    def _shard_name() -> str:
        return f"shard-{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}.npz"

    def compact(self, model_id: str) -> Path | None:
        """Merge the shards this process has read for `model_id` into one; returns the new shard."""
        t = self._table(model_id)
        t.refresh(None)
        if len(t.files) <= 1:
            return None
        keys = np.array(list(t.index.keys()), dtype=KEY_DTYPE)
        vectors = np.stack([t.blocks[b][r] for b, r in t.index.values()]).astype(np.float32)
        old = list(t.files)
        path = write_shard(t.dir / self._shard_name(), model_id, keys, vectors)
        for p in old:
            try:
                p.unlink()
            except OSError:
                pass
        t.blocks, t.index, t.files = [], {}, [path]
        t.seen.add(path.name)
        t._add(keys, vectors)
        return path

    def count(self, model_id: str) -> int:
        """Number of distinct texts cached for `model_id`."""
        t = self._table(model_id)
        t.refresh(None)
        return len(t.index)


def embed_texts_with_stats(
    encoder: TextEncoder,
    texts: Sequence[str],
    cache: EmbeddingCache | None | bool = None,
    *,
    progress: bool | None = None,
    batch_size: int | None = None,
) -> tuple[np.ndarray, EmbedStats]:
    """Like `embed_texts`, also returning the EmbedStats."""
    t0 = time.perf_counter()
    texts = check_texts(texts)
    if getattr(encoder, "parts", None) and hasattr(encoder, "join"):  # a fusion: each part cached under its own id
        return _fused(encoder, texts, cache, progress, batch_size, t0)
    dim = int(encoder.dim)
    model_id = str(encoder.model_id)
    stats = EmbedStats(model_id=model_id, n_texts=len(texts))
    if cache is None or cache is True:
        cache = EmbeddingCache()
    keys = [text_key(t) for t in texts]
    first: dict[str, str] = {}
    for k, t in zip(keys, texts):
        first.setdefault(k, t)
    stats.n_unique = len(first)
    found = cache.lookup(model_id, list(first), dim) if cache else {}
    miss_keys = [k for k in first if k not in found]
    stats.hits = len(first) - len(miss_keys)
    stats.misses = len(miss_keys)
    if miss_keys:
        miss_texts = [first[k] for k in miss_keys]
        kwargs: dict[str, Any] = {"progress": progress}
        if batch_size is not None:
            kwargs["batch_size"] = batch_size
        t1 = time.perf_counter()
        new = np.asarray(encoder.encode(miss_texts, **kwargs))
        stats.encode_seconds = time.perf_counter() - t1
        if new.shape != (len(miss_texts), dim):
            raise RiskRankError(
                f"encoder {model_id!r} returned shape {new.shape} for {len(miss_texts)} texts, expected "
                f"({len(miss_texts)}, {dim})"
            )
        bad = ~np.all(np.isfinite(new), axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise RiskRankError(
                f"encoder {model_id!r} produced NaN/inf for {int(bad.sum())} of {len(miss_texts)} texts, e.g. "
                f"{miss_texts[i]!r:.120}; nothing was cached"
            )
        new = new.astype(np.float32, copy=False)
        if cache:
            cache.put(model_id, miss_keys, new)
        found.update(zip(miss_keys, new))
    out = np.empty((len(texts), dim), np.float32)
    for i, k in enumerate(keys):
        out[i] = found[k]
    stats.seconds = time.perf_counter() - t0
    if cache:
        cache.last_stats = stats
    return out, stats


def _fused(encoder, texts, cache, progress, batch_size, t0: float) -> tuple[np.ndarray, EmbedStats]:
    """``embed_texts_with_stats`` of a fusion (``encode.families.FusedEncoder``): each part's vectors through the
    cache under the part's own id, joined; the stats count a text as a hit when every part had it."""
    got = [embed_texts_with_stats(p, texts, cache, progress=progress, batch_size=batch_size) for p in encoder.parts]
    stats = EmbedStats(model_id=str(encoder.model_id), n_texts=len(texts), n_unique=got[0][1].n_unique,
                       hits=min(s.hits for _, s in got), misses=max(s.misses for _, s in got),
                       encode_seconds=sum(s.encode_seconds for _, s in got), seconds=time.perf_counter() - t0)
    if cache:
        cache.last_stats = stats
    return encoder.join([v for v, _ in got]), stats


def embed_texts(
    encoder: TextEncoder,
    texts: Sequence[str],
    cache: EmbeddingCache | None | bool = None,
    *,
    progress: bool | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """float32 [n, dim] embeddings of `texts` in input order, each unique text encoded at most once ever.

    cache: an EmbeddingCache; None uses EmbeddingCache() (the default cache directory); False disables the
    disk cache (duplicates are still encoded once). A fusion of encoders (``encode.families.FusedEncoder``) is
    embedded part by part, each part cached under its own id, so a fusion reuses what its parts embedded. The
    call's EmbedStats (hits, misses, seconds) is left in `cache.last_stats`; use `embed_texts_with_stats` to get
    it directly. Raises RiskRankError when the encoder returns NaN/inf (nothing is cached then).
    """
    return embed_texts_with_stats(encoder, texts, cache, progress=progress, batch_size=batch_size)[0]
