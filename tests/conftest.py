"""Shared fixtures. Tests that read ../shared/datasets are marked `realdata` and skip when it is absent."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import pytest

from riskrank_jax.paths import real_data_available, resolve_data_dir

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.fixture(scope="session")
def real_data_dir():
    """Root of the real benchmarks; skips the test (saying why) when they are not present."""
    if not real_data_available():
        pytest.skip("real benchmarks not found: set RISKRANK_DATA or place them at ../shared/datasets")
    return resolve_data_dir()


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES
