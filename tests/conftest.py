"""Shared fixtures. Tests that read ../shared/datasets are marked `realdata` and skip when it is absent."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path


os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if "RISKRANK_STATE" not in os.environ:  # the gateways the tests start keep their pins here, never in ~/.local
    import tempfile

    os.environ["RISKRANK_STATE"] = tempfile.mkdtemp(prefix="riskrank-state-")

import pytest

from riskrank_jax.paths import real_data_available, resolve_data_dir

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


REPORTED: list[str] = []  # figures tests measured, printed in pytest's closing summary (report_line)


@pytest.fixture
def report_line(request):
    """Append a line to the closing summary of the run (shown with -q too): a figure a test measured. The line
    travels with the test's report, so one measured in a pytest-xdist worker reaches the summary as well."""
    return lambda line: request.node.user_properties.append(("figure", line))


# The longest test files first (longest first), the rest in their usual order: pytest-xdist hands whole files to its
# two workers in collection order, so a long file collected late runs alone at the end and sets the suite's wall
# time. The order is from a fresh clone's `pytest --durations` (docs/performance.md); a file missing here only
# runs in its usual place.
LONG_FILES_FIRST = ("test_livemcpbench.py", "test_serve_published.py", "test_jobs.py", "test_encoder_tune.py",
                    "test_fit_tune.py", "test_team_service.py", "test_fit_kill_resume.py", "test_sweep.py",
                    "test_kill_resume.py", "test_reproducibility.py", "test_transfer.py", "test_neighbours.py",
                    "test_serve_attacks.py", "test_serve.py", "test_train.py", "test_serve_misbehaving.py")


def pytest_collection_modifyitems(config, items):
    first = {name: i for i, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: each file's own order kept


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        REPORTED.extend(value for key, value in report.user_properties if key == "figure")


def pytest_terminal_summary(terminalreporter):
    if REPORTED:
        terminalreporter.section("figures the tests measured")
        for line in REPORTED:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def shared_gateway_cache(tmp_path_factory):
    """One embedding and XLA compile cache for the gateway subprocesses of this run (its pytest-xdist workers
    included): the first gateway compiles the encoder's programs, the others read them. Caches are keyed by
    content, so sharing changes no result, only the CPU the suite spends (its 12-minute budget on 2 cores)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "shared-gateway-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def real_data_dir():
    """Root of the real benchmarks; skips the test (saying why) when they are not present."""
    if not real_data_available():
        pytest.skip("real benchmarks not found: set RISKRANK_DATA or place them at ../shared/datasets")
    return resolve_data_dir()


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny random mean-pooling BERT encoder directory (for `--encoder` in fast end-to-end sweeps)."""
    # deferred: tests/tiny_bert.py imports transformers and flax, which most test files never need
    from tiny_bert import make_tiny_bert

    root = tmp_path_factory.mktemp("tiny-bert") / "mean"
    make_tiny_bert(root, "mean")
    return root


def cli_invoker(cache: str):
    """`run(*args, code=0)`: invoke `riskrank-jax` in-process with RISKRANK_CACHE=cache (the arguments expanded
    as the entry point does: `--seeds 1 2`), assert its exit status and that no traceback was printed; returns
    click's Result. In-process: no fresh interpreter re-importing JAX per command."""
    from click.testing import CliRunner

    from riskrank_jax.cli.main import cli
    from riskrank_jax.cli.options import expand_multi_value_options

    def run(*args, code=0):
        argv = expand_multi_value_options([str(a) for a in args])
        res = CliRunner().invoke(cli, argv, env={"RISKRANK_CACHE": str(cache)})
        assert res.exit_code == code, (res.output, res.stderr, res.exception)
        assert "Traceback" not in res.output + res.stderr
        return res

    return run


def run_script(path, *args, capsys, monkeypatch) -> str:
    """stdout of `python PATH ARGS`, run in this process as __main__ (runpy, sys.argv set): no fresh interpreter
    re-importing JAX. Its exit status must be 0 (no SystemExit, or SystemExit(0)); an exception fails the test."""
    monkeypatch.setattr(sys, "argv", [str(path), *map(str, args)])
    capsys.readouterr()
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        assert e.code in (0, None), (f"{path} exited with {e.code!r}", capsys.readouterr())
    return capsys.readouterr().out
