"""Shared fixtures. Tests that read ../shared/datasets are marked `realdata` and skip when it is absent."""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if "RISKRANK_STATE" not in os.environ:  # the gateways the tests start keep their pins here, never in ~/.local
    import tempfile

    os.environ["RISKRANK_STATE"] = tempfile.mkdtemp(prefix="riskrank-state-")

import pytest

from riskrank_jax.paths import real_data_available, resolve_data_dir

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]


REPORTED: list[str] = []  # figures tests measured, printed in pytest's closing summary (report_line)


@pytest.fixture
def report_line(request):
    """Append a line to the closing summary of the run (shown with -q too): a figure a test measured. The line
    travels with the test's report, so one measured in a pytest-xdist worker reaches the summary as well."""
    return lambda line: request.node.user_properties.append(("figure", line))


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        REPORTED.extend(value for key, value in report.user_properties if key == "figure")


def pytest_terminal_summary(terminalreporter):
    if REPORTED:
        terminalreporter.section("figures the tests measured")
        for line in REPORTED:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def real_data_dir():
    """Root of the real benchmarks; skips the test (saying why) when they are not present."""
    if not real_data_available():
        pytest.skip("real benchmarks not found: set RISKRANK_DATA or place them at ../shared/datasets")
    return resolve_data_dir()


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


def make_tiny_bert(root: Path, pooling: str, *, max_seq_length: int = 40, msgpack: bool = False):
    """A tiny random BERT (hidden 32, 2 layers, fixed seed) with the default model's tokenizer, saved at `root`
    in the sentence-transformers layout `riskrank_jax.encode.encoder.load_encoder` reads. Returns (model, params)."""
    from flax.traverse_util import flatten_dict, unflatten_dict
    from transformers import BertConfig, FlaxBertModel

    from riskrank_jax.encode.sentence_config import default_model_dir

    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=37, max_position_embeddings=64)
    model = FlaxBertModel(cfg, _do_init=False)
    rng = np.random.default_rng(0)
    params = {}
    for key, s in flatten_dict(model.params_shape_tree).items():
        base = 1.0 if key[-1] == "scale" else 0.0
        params[key] = (base + 0.2 * rng.standard_normal(s.shape)).astype(np.float32)
    params = unflatten_dict(params)
    root.mkdir(parents=True)
    model.save_pretrained(root, params=params, safe_serialization=not msgpack)
    src = default_model_dir()
    for f in TOKENIZER_FILES:
        shutil.copy(src / f, root / f)
    (root / "1_Pooling").mkdir()
    flags = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, **{v: k == pooling for k, v in flags.items()}}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length}))
    return model, params


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny random mean-pooling BERT encoder directory (for `--encoder` in fast end-to-end sweeps)."""
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
