"""The persistent XLA compilation cache the sweep turns on (riskrank_jax.runtime.compile_cache), and --benchmark lists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from riskrank_jax.cli.options import MULTI_VALUE_OPTIONS, expand_multi_value_options
from riskrank_jax.runtime import compile_cache
from riskrank_jax.sweep import expand_benchmarks

REPO = Path(__file__).resolve().parent.parent

_PROGRAM = """
import sys, time
import jax, jax.numpy as jnp
from pathlib import Path
from riskrank_jax.runtime import compile_cache
print(compile_cache.enable(Path(sys.argv[1])))
f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum(0))
print(float(f(jnp.arange(64.0).reshape(8, 8) / 64).sum()))
"""


def _run(root: Path, **env) -> list[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    e.update(PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu", **env)
    r = subprocess.run([sys.executable, "-c", _PROGRAM, str(root)], env=e, capture_output=True, text=True,
                       timeout=300, check=True)
    return r.stdout.split()


def test_enable_writes_programs_under_a_host_tagged_dir_and_a_rerun_reads_them(tmp_path):
    first = _run(tmp_path)
    where = Path(first[0])
    assert where == tmp_path / "xla" / compile_cache.host_tag()
    written = sorted(p.name for p in where.iterdir())
    assert any(n.startswith("jit__lambda") for n in written), written
    second = _run(tmp_path)
    assert second == first  # same directory, same result from the program read back
    assert sorted(p.name for p in where.iterdir()) == written  # nothing recompiled and written anew


def test_a_compilation_cache_the_user_configured_is_left_as_it_is(tmp_path):
    mine = tmp_path / "mine"
    out = _run(tmp_path / "root", JAX_COMPILATION_CACHE_DIR=str(mine))
    assert Path(out[0]) == mine
    assert not (tmp_path / "root" / "xla").exists()


def test_host_tag_is_stable_and_short():
    assert compile_cache.host_tag() == compile_cache.host_tag()
    assert len(compile_cache.host_tag()) == 12


def test_benchmark_lists_expand_in_order_once_each():
    assert expand_benchmarks(["demo"]) == ["demo"]
    assert expand_benchmarks(["all"]) == ["demo", "ultratool", "sealtools", "livemcpbench"]
    assert expand_benchmarks(["sealtools", "ultratool", "sealtools"]) == ["sealtools", "ultratool"]
    assert expand_benchmarks(["ultratool", "all"]) == ["ultratool", "demo", "sealtools", "livemcpbench"]
    argv = ["--benchmark", "ultratool", "sealtools", "--variants", "paper", "--force"]
    assert expand_multi_value_options(argv, (*MULTI_VALUE_OPTIONS, "--benchmark")) == [
        "--benchmark", "ultratool", "--benchmark", "sealtools", "--variants", "paper", "--force"]
