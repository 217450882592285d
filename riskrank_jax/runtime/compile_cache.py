"""A persistent cache of XLA's compiled programs, so a second sweep does not compile again.

A sweep compiles a few hundred programs (training epochs, smoothing kernels, evaluation), a sizeable share of a
CPU sweep's time (docs/performance.md, "Whole sweeps"). JAX can keep the compiled executables on disk
(``jax_compilation_cache_dir``) keyed by the program, the compile options, the JAX/XLA version and the
device; a later process with the same programs loads them instead of compiling. Results are unchanged (the
same executable runs).

The directory is ``<cache root>/xla/<host tag>``: the host tag hashes the CPU's model name and feature flags,
so a cache directory shared between different machines (a network home) never hands one CPU code compiled
for another's instruction set. A compilation cache the user configured for JAX already
(``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``) is left as it is.
"""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path

import jax

# every program is kept: on a CPU even the small ones (a few hundred jit(slice), jit(stack), ...) take longer to
# compile than to read back (docs/performance.md, "Whole sweeps")
MIN_COMPILE_SECONDS = 0.0


def host_tag() -> str:
    """A short hash of this machine's CPU model, feature flags and architecture."""
    parts = [platform.machine(), platform.system()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU part"):
                    parts.append(line.strip())
                if line.strip() == "":  # the first processor's block is enough
                    break
    except OSError:
        parts.append(platform.processor())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def compile_cache_dir(cache_root: Path) -> Path:
    """Where ``enable`` keeps the compiled programs under an embedding-cache root."""
    return Path(cache_root) / "xla" / host_tag()


def enable(cache_root: Path) -> Path | None:
    """Turn on JAX's persistent compilation cache under ``cache_root`` (see the module docstring).

    Returns the directory in use: this one, or the one the user had configured already (left as it is);
    None when the directory cannot be created (the run then compiles as usual)."""
    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    path = compile_cache_dir(cache_root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


__all__ = ["enable", "compile_cache_dir", "host_tag", "MIN_COMPILE_SECONDS"]
