"""`riskrank-jax fit --tune-encoder` (riskrank_jax/rank/fit.py) and rankers that carry their tuned encoder
(`Ranker.save` / `Ranker.load`, `rank --model`), on the tiny random BERT of conftest and a 16-tool MCP registry.

Two logs of the same 200 requests: in the "alias" log each request names its tool by a word that no tool text
holds (agenda -> calendar_tool), so neither BM25 nor the random encoder finds it and only tuning can learn it;
in the "agree" log each request's tool is the one the zero-shot ranker puts first, so the zero-shot ranker scores
NDCG 1 on the held-out requests, no tuned encoder can beat it, and none may be saved. Same texts, same shapes
and one tuning configuration: the second fit reuses the first one's compiled programs.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from conftest import cli_invoker
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts
from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.errors import RankerError
from riskrank_jax.model import encoder_tune
from riskrank_jax.model.heldout import heldout_split
from riskrank_jax.rank.fit import FIT_TUNE_CONFIG, FitConfig, fit_ranker
from riskrank_jax.rank.ranker import Ranker
from riskrank_jax.rank.ranker_store import read_manifest, saved_encoder_dir
from riskrank_jax.runtime import compile_cache
from riskrank_jax.serve.catalog import build_catalog
from riskrank_jax.serve.config import RankSettings

WORDS = ("calendar invoice weather repository printer backup flight recipe music ticket contract budget sensor "
         "camera garden parcel").split()
ALIAS = ("agenda billing forecast codebase paper archive airline cooking songs admission agreement spending gauge "
         "photo plants shipment").split()
FILL = ("please", "could you", "now", "quickly", "for me", "today")
# batch 128: one step per epoch on the 160 training requests and on all 200, so the retrain on every request
# reuses the compiled train step (the file stays fast); lr 1e-2 over 100 steps suits the tiny random BERT
TUNE = dataclasses.replace(FIT_TUNE_CONFIG, layers=1, epochs=100, batch_size=128, lr=1e-2)
FIT = FitConfig(seeds=(0,), epochs=1, tune_encoder=TUNE)
CLI_TUNE = ("--seeds", "0", "--epochs", "1", "--tune-encoder", "--tune-layers", "1", "--tune-epochs", "100",
            "--tune-set", "batch_size=128", "--tune-set", "lr=1e-2")


def _write_world(root, encoder_dir) -> dict:
    """An MCP tools/list response (every tool declares its risk: the shipped risk head is for another encoder),
    the alias and agree logs, and a cache directory."""
    tools = [{"name": f"{w}_tool", "description": f"Manage the {w} records.", "risk": 1 + (i % 3 == 0),
              "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}}
             for i, w in enumerate(WORDS)]
    reg = root / "tools.json"
    reg.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}))
    rng = np.random.default_rng(0)
    alias = [(f"{rng.choice(FILL)} look at my {ALIAS[g]} {rng.choice(FILL)}", int(g))
             for g in rng.integers(len(WORDS), size=200)]
    queries = [q for q, _ in alias]
    cache = EmbeddingCache(root / "cache")
    zero = Ranker.from_registry([str(reg)], encoder=load_encoder(encoder_dir), cache=cache)
    first = zero.rank(embed_texts(zero.encoder, queries, cache), k=1, q_texts=queries)[:, 0]  # as fit embeds them
    for name, gold in (("alias", [f"{WORDS[g]}_tool" for _, g in alias]), ("agree", [zero.tool_names[i] for i in first])):
        (root / f"{name}.jsonl").write_text("".join(json.dumps({"query": q, "tools": [t]}) + "\n"
                                                    for q, t in zip(queries, gold)))
    return {"root": root, "tools": str(reg), "alias": alias, "zero": zero, "cache": str(root / "cache"),
            "encoder": str(encoder_dir)}


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_bert_dir):
    root = tmp_path_factory.mktemp("fit-tune")
    compile_cache.enable(root / "cache")  # as `rank` does: the encoders loaded from one directory compile once
    return _write_world(root, tiny_bert_dir)


@pytest.fixture(scope="module")
def tuned(world):
    """fit --tune-encoder through the library on the alias log, saved to <root>/tuned."""
    ranker, report = fit_ranker([world["tools"]], str(world["root"] / "alias.jsonl"), encoder=world["zero"].encoder,
                                cache=EmbeddingCache(world["cache"]), config=FIT, progress=False,
                                checkpoint_dir=world["root"] / "fit-runs")
    return ranker, report, ranker.save(world["root"] / "tuned")


@pytest.fixture(scope="module")
def tuned_encoder(tuned):
    """load_encoder of the saved DIR/encoder (once: each loaded Encoder compiles its own programs)."""
    return load_encoder(tuned[2] / "encoder")


def _held_out_ids(world, first: int | None = 8) -> list[int]:
    """The first ``first`` (None: all) of fit's held-out requests, every copy of a request text on one side."""
    texts = np.asarray([q for q, _ in world["alias"]], dtype=str)
    return list(heldout_split(np.arange(len(texts)), FIT.heldout_fraction, FIT.seeds[0], groups=texts)[1][:first])


def _held_out(world) -> list[str]:
    return [world["alias"][i][0] for i in _held_out_ids(world)]


def test_a_fit_run_again_reuses_its_finished_tuning_runs_without_a_step(world, tuned, monkeypatch):
    """The tuning runs were checkpointed under a key of their inputs: the same fit again trains no step (the
    compiled step would raise) and returns the same tool vectors; its runs sit under one key directory."""
    def no_step(*args, **kwargs):
        raise AssertionError("a finished tuning run was trained again")

    monkeypatch.setattr(encoder_tune, "compiled_step", lambda *a, **k: no_step)
    again, report = fit_ranker([world["tools"]], str(world["root"] / "alias.jsonl"), encoder=world["zero"].encoder,
                               cache=EmbeddingCache(world["cache"]), config=FIT, progress=False,
                               checkpoint_dir=world["root"] / "fit-runs")
    assert report["chosen"] == tuned[1]["chosen"] == "tuned-encoder"
    np.testing.assert_array_equal(again.tool_emb, tuned[0].tool_emb)
    (key,) = (world["root"] / "fit-runs").iterdir()
    assert sorted(p.name for p in key.iterdir()) == ["all-seed0", "heldout-seed0"] and len(key.name) == 16


def test_the_tuned_encoder_wins_and_is_saved_with_the_ranker(world, tuned, tuned_encoder):
    ranker, report, out = tuned
    zero = world["zero"]
    tuned_ndcg = report["ndcg@5_tuned_per_seed"]
    assert report["chosen"] == "tuned-encoder" and report["tuned_seeds"] == [0] and len(tuned_ndcg) == 1
    assert tuned_ndcg[0] > max(report["ndcg@5_zero_shot"], *report["ndcg@5_head_per_seed"]) + 0.1, report
    assert "tuned again on all 200 queries" in report["why"]
    assert {"zero_shot", "heads", "tune_states", "tune_per_seed", "tune_final", "total"} <= set(report["seconds"])
    assert report["fit"]["tune_encoder"]["layers"] == 1 and report["tuned_steps"] == 100
    enc_dir = out / "encoder"
    assert (enc_dir / "model.safetensors").is_file() and saved_encoder_dir(out) == enc_dir
    tuned_enc = tuned_encoder
    meta = json.loads((enc_dir / "riskrank_tune.json").read_text())
    assert meta["base_encoder"] == zero.encoder_id and meta["seed"] == 0
    assert ranker.encoder_id == tuned_enc.model_id == read_manifest(out)["encoder_id"] != zero.encoder_id
    # risk is the registry's assessment, untouched by the tuned encoder
    assert ranker.risk_levels.tolist() == zero.risk_levels.tolist() and ranker.risk_source == zero.risk_source
    assert np.array_equal(ranker.risk_scores, zero.risk_scores) and ranker.config == zero.config
    # the tool vectors are the saved encoder's own
    assert np.abs(ranker.tool_emb - tuned_enc.encode(list(zero.tool_texts))).max() < 1e-5


def test_a_long_log_keeps_the_layers_measured_held_out_instead_of_tuning_again(world, tmp_path):
    """When the step budget cut the held-out run's epochs (a long log), the winning layers are the held-out run's
    (no run over every request): here 60 of 100 one-step epochs. A log within the budget is tuned again."""
    assert FitConfig(tune_encoder=FIT_TUNE_CONFIG).retrains(1_600)  # 2,000 requests: 4 epochs of 50 steps
    assert not FitConfig(tune_encoder=FIT_TUNE_CONFIG).retrains(13_600)  # 17,000: 1 of 4 epochs within 512 steps
    assert not FitConfig(tune_encoder=FIT_TUNE_CONFIG, tune_retrain=False).retrains(1_600)
    cut = dataclasses.replace(FIT, tune_encoder=dataclasses.replace(TUNE, step_budget=60))
    ranker, report = fit_ranker([world["tools"]], str(world["root"] / "alias.jsonl"), encoder=world["zero"].encoder,
                                cache=EmbeddingCache(world["cache"]), config=cut, progress=False,
                                checkpoint_dir=tmp_path / "runs", work_dir=tmp_path / "work")
    assert report["chosen"] == "tuned-encoder" and report["tuned_steps"] == 60, report
    assert ("kept the layers tuned on the training queries (a long log: the step budget, 60 steps, cut their "
            "tuning to 60 of 100 epochs, so tuning again on every query would take as long again to add the 36 "
            "held-out ones)") in report["why"]
    (key,) = (tmp_path / "runs").iterdir()
    assert [p.name for p in key.iterdir()] == ["heldout-seed0"]
    # the log repeats some requests: every copy is on one side of fit's split, 36 rows of 35 distinct held out (20 % of 173)
    texts = np.asarray([q for q, _ in world["alias"]], dtype=str)
    held_ids = _held_out_ids(world, None)
    held = texts[held_ids]
    assert len(set(texts)) < len(texts) and report["heldout"] == held.size == 36 and len(set(held)) == 35
    assert not set(held) & set(texts[np.setdiff1d(np.arange(texts.size), held_ids)])
    assert np.abs(ranker.tool_emb - ranker.encoder.encode(list(world["zero"].tool_texts))).max() < 1e-5


def test_a_loaded_tuned_ranker_embeds_requests_with_its_own_encoder(world, tuned, tuned_encoder):
    _, _, out = tuned
    zero = world["zero"]
    tuned_enc = tuned_encoder
    loaded = Ranker.load(out, expect_encoder_id=zero.encoder_id)  # the base encoder's id is accepted
    assert loaded.encoder.model_id == loaded.encoder_id == tuned_enc.model_id
    assert Ranker.load(out, expect_encoder_id=tuned_enc.model_id).encoder_id == tuned_enc.model_id
    queries = _held_out(world)
    got = [[h.name for h in hs] for hs in loaded.rank_queries(queries, k=5)]
    ids = loaded.rank(tuned_enc.encode(queries), k=5, q_texts=queries)
    assert got == [[loaded.tool_names[i] for i in row] for row in ids]
    with pytest.raises(RankerError, match="tuned from encoder"):
        Ranker.load(out, expect_encoder_id="some-other-encoder")


def test_rank_cli_with_the_model_ranks_with_the_tuned_encoder(world, tuned, tuned_encoder):
    _, _, out = tuned
    invoke = cli_invoker(world["cache"])
    queries = _held_out(world)
    args = [a for q in queries for a in ("--query", q)]
    res = invoke("rank", world["tools"], "--model", str(out), "--encoder", world["encoder"], *args, "--json")
    got = [[h["name"] for h in r["hits"]] for r in json.loads(res.stdout)["results"]]
    loaded = Ranker.load(out)
    tuned_ids = loaded.rank(tuned_encoder.encode(queries), k=5, q_texts=queries)
    base_ids = loaded.rank(world["zero"].encoder.encode(queries), k=5, q_texts=queries)
    assert got == [[loaded.tool_names[i] for i in row] for row in tuned_ids]
    assert not np.array_equal(tuned_ids, base_ids)  # the check tells the two encoders apart
    gold = [f"{WORDS[world['alias'][i][1]]}_tool" for i in _held_out_ids(world)]
    assert sum(g == names[0] for g, names in zip(gold, got)) >= 6, (gold, got)


def test_the_gateway_serves_a_tuned_model_with_its_encoder(world, tuned, tuned_encoder):
    catalog = build_catalog([], [world["tools"]], RankSettings(model=str(tuned[2])), world["zero"].encoder,
                            EmbeddingCache(world["cache"]))
    served = catalog.ranker
    assert served.encoder_id == served.encoder.model_id == tuned_encoder.model_id
    queries = _held_out(world)[:3]
    ids = served.rank(tuned_encoder.encode(queries), k=5, q_texts=queries)
    assert [[h.name for h in hs] for hs in served.rank_queries(queries, k=5)] == [
        [served.tool_names[i] for i in row] for row in ids]


def test_cli_fit_keeps_the_zero_shot_ranker_when_tuning_does_not_win(world, tuned):
    invoke = cli_invoker(world["cache"])
    out = world["root"] / "agree-model"
    res = invoke("fit", world["tools"], "--queries", str(world["root"] / "agree.jsonl"), "--out", str(out),
                 "--encoder", world["encoder"], *CLI_TUNE)
    assert "NDCG@5 on them: zero-shot 1.000" in res.stdout and "tuned encoder (1 layers, 100 epochs) per seed" in res.stdout
    assert "chosen: zero-shot" in res.stdout and "so no encoder is saved" in res.stdout
    assert not (out / "encoder").exists() and "encoder_dir" not in read_manifest(out)
    plain = Ranker.load(out, expect_encoder_id=world["zero"].encoder_id)
    assert plain.encoder is None and saved_encoder_dir(out) is None  # loads as a ranker saved before tuning existed
    again = shutil.copytree(tuned[2], world["root"] / "resaved")
    plain.save(again)  # a ranker without a tuned encoder, saved over one with it: the stale encoder/ goes
    assert not (again / "encoder").exists() and Ranker.load(again).encoder is None


@pytest.mark.parametrize("args,message", [
    (("--tune-layers", "1"), "add --tune-encoder"),
    (("--tune-encoder", "--tune-set", "speed=3"), "KEY one of layers, epochs"),
    (("--tune-encoder", "--tune-set", "lr"), "expected KEY=VALUE (e.g. lr=5e-4)"),
    (("--tune-encoder", "--tune-set", "lr=fast"), "lr takes a float"),
    (("--tune-encoder", "--tune-layers", "1", "--tune-set", "layers=2"), "disagree"),
    (("--tune-encoder",), "has 2 transformer layers"),  # the default 3 layers: more than the tiny BERT has
    (("--tune-encoder", "--tune-layers", "1", "--tune-set", "hard_pool=0"), "negatives <= hard_pool"),
])
def test_bad_tuning_options_are_one_error_line(world, args, message):
    res = cli_invoker(world["cache"])("fit", world["tools"], "--queries", str(world["root"] / "agree.jsonl"),
                                      "--out", str(world["root"] / "bad"), "--encoder", world["encoder"], *args, code=1)
    assert res.stderr.startswith("error: ") and message in res.stderr, res.stderr
