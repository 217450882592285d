"""The cross-encoder second stage (riskrank_jax/model/cross_encoder.py) on tiny random BERT / T5 models built
here: loading equals transformers' own forward, training on a tiny word-matching task beats the untrained
model on held-out queries, checkpoints resume and are reused, the gate keeps the first stage at γ = 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.traverse_util import flatten_dict
from huggingface_hub import try_to_load_from_cache
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import BertConfig, BertTokenizerFast, PreTrainedTokenizerFast, RobertaConfig, T5Config

from riskrank_jax.encode import hf
from riskrank_jax.encode.bert_weights import param_shapes
from riskrank_jax.encode.sentence_config import default_model_dir
from riskrank_jax.errors import RiskRankError
from riskrank_jax.model import cross_encoder as cem
from riskrank_jax.model import cross_encoder_train as cet
from riskrank_jax.model.negatives import best_non_gold
from riskrank_jax.retrieve.hybrid import zscore

from tiny_bert import flax_class_or_skip, random_params, save_bert

KEYWORDS = [f"key{i}" for i in range(40)]
FILLER = ["please", "the", "an", "tool", "for", "to", "of", "and", "find", "get", "make", "run", "list", "show",
          "data", "file", "user", "item", "report", "value", "service", "with", "my", "all", "new", "old"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789")
         + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"] + FILLER + KEYWORDS
         + [f"word{i}" for i in range(60)])
N_TOOLS, N_QUERIES = 30, 40
REPO = Path(__file__).resolve().parent.parent


def _bert_config(**kw):
    return BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, **kw)


def _save_tokenizer(d: Path):
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    # from the directory: transformers 4 takes the vocabulary as vocab_file=, 5 as vocab= (a file given as
    # vocab_file= is ignored there, every word then [UNK])
    BertTokenizerFast.from_pretrained(str(d)).save_pretrained(str(d))


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    """A BERT sequence classifier (num_labels=1) saved as FlaxBertForSequenceClassification.save_pretrained saved
    it (flax_model.msgpack), and its params."""
    d = tmp_path_factory.mktemp("ce") / "classifier"
    _save_tokenizer(d)
    config = _bert_config(num_labels=1)
    params = random_params(param_shapes(config, num_labels=1), 1)
    save_bert(d, config, params, msgpack=True)
    return d, config, params


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    """A bi-encoder BERT directory (FlaxBertModel's safetensors) with the tiny vocabulary."""
    d = tmp_path_factory.mktemp("ce") / "encoder"
    _save_tokenizer(d)
    config = _bert_config()
    params = random_params(param_shapes(config), 2)
    save_bert(d, config, params)
    return d, params


@pytest.fixture(scope="module")
def task():
    """40 queries over 30 tools; a query shares its keyword with its one gold tool; the first stage is noise
    plus a bump at the gold tool (gold mostly in the top 20, rarely first)."""
    rng = np.random.default_rng(0)
    tools = [f"{KEYWORDS[t]} {rng.choice(FILLER)} {rng.choice(FILLER)} tool" for t in range(N_TOOLS)]
    gold = rng.integers(0, N_TOOLS, N_QUERIES)
    queries = [f"{rng.choice(FILLER)} {KEYWORDS[g]} {rng.choice(FILLER)}" for g in gold]
    first = rng.standard_normal((N_QUERIES, N_TOOLS)).astype(np.float32)
    first[np.arange(N_QUERIES), gold] += 1.0
    return queries, gold[:, None].astype(np.int32), tools, first


CONFIG = cem.CrossEncoderConfig(top=20, epochs=12, batch_size=8, negatives=4, hard_pool=19, lr=3e-3,
                                heldout_fraction=0.2, checkpoint_every=24, score_batch_size=80)


@pytest.fixture(scope="module")
def trained(encoder_dir, task, tmp_path_factory):
    ce0 = cem.init_from_encoder(encoder_dir[0])
    ckpt = tmp_path_factory.mktemp("ce-ckpt") / "run"
    queries, gold, tools, first = task
    tuned, report = cet.train_cross_encoder(ce0, queries, gold, tools, first, 0, CONFIG, checkpoint_dir=ckpt,
                                            progress=False)
    return ce0, tuned, report, ckpt


def _gold_rank_mean(ce, task, rows):
    """Mean rank (0 = first) of the gold tool among each query's candidates by the CE alone, over the
    queries of ``rows`` whose gold tool is a candidate."""
    queries, gold, tools, first = task
    cand = cet.candidates(first, CONFIG.top)[rows]
    s = cet.ce_scores_for(ce, [queries[q] for q in rows], tools, cand, batch_size=CONFIG.score_batch_size,
                          progress=False)
    ranks = [int((s[i] > s[i][cand[i] == gold[q, 0]]).sum()) for i, q in enumerate(rows) if gold[q, 0] in cand[i]]
    return float(np.mean(ranks))


# ---- (a) a saved sequence-classification model scores as transformers' own forward


def test_loaded_classifier_equals_transformers_forward(classifier_dir):
    d, config, params = classifier_dir
    model = flax_class_or_skip("FlaxBertForSequenceClassification")(config, _do_init=False)
    ce = cem.load_cross_encoder(d)
    assert ce.kind == "classifier" and ce.max_tokens == 64  # capped at the position table
    assert ce.backend == "bert"  # the project's one BERT forward pass (encode/bert.py), checked against transformers'
    queries = ["please key1 the data", "find key2", "key3 report for my user with all new items and values"]
    texts = ["key1 tool for data", "key7 service", "key3 list of reports"]
    got = ce.score_pairs(queries, texts, batch_size=4)
    enc = ce.tokenizer(queries, texts, truncation="longest_first", max_length=64, padding=True, return_tensors="np")
    forward = jax.jit(lambda p, i, m, t: model(i, attention_mask=m, token_type_ids=t, params=p).logits[:, 0])
    want = forward(params, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    assert got.dtype == np.float32 and got.shape == (3,)
    np.testing.assert_allclose(got, np.asarray(want), atol=1e-5)
    again = ce.score_pairs([queries[i] for i in (2, 0, 1)], [texts[i] for i in (2, 0, 1)], batch_size=4)
    np.testing.assert_array_equal(again, got[[2, 0, 1]])  # results come back in the input order


def test_monot5_scores_true_minus_false_at_the_first_decoder_step(tmp_path):
    FlaxT5ForConditionalGeneration = flax_class_or_skip("FlaxT5ForConditionalGeneration")
    words = ["Query:", "Document:", "Relevant:", "true", "false"] + FILLER + KEYWORDS
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{f"▁{w}": i + 3 for i, w in enumerate(words)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    cem.flax_t5_compat()  # transformers' FlaxT5 calls jnp.clip(a_max=...), which this jax removed
    cfg = T5Config(vocab_size=len(vocab), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = FlaxT5ForConditionalGeneration(cfg, _do_init=False)
    params = random_params(model.params_shape_tree, 3)
    model.save_pretrained(str(tmp_path), params=params)
    tok.save_pretrained(str(tmp_path))
    ce = cem.load_cross_encoder(tmp_path)
    assert ce.kind == "monot5" and ce.backend == "transformers"  # T5 needs transformers' class
    queries, texts = ["please key1", "key2 the data"], ["key1 tool for data", "key5 service"]
    got = ce.score_pairs(queries, texts)
    enc = tok([f"Query: {q} Document: {d} Relevant:" for q, d in zip(queries, texts)], padding=True,
              return_tensors="np")
    forward = jax.jit(lambda p, i, m: model(i, attention_mask=m, decoder_input_ids=jnp.zeros((2, 1), jnp.int32),
                                            params=p).logits[:, 0])
    logits = forward(params, enc["input_ids"], enc["attention_mask"])
    np.testing.assert_allclose(got, np.asarray(logits[:, vocab["▁true"]] - logits[:, vocab["▁false"]]), atol=1e-5)


def test_flax_only_families_say_which_transformers_they_need(tmp_path, monkeypatch):
    """monoT5 and classifiers other than BERT run on transformers' Flax classes, which only 4.x has: under 5.x
    loading one is a RiskRankError naming the installed version and what to install (never an ImportError)."""
    major = int(cem._installed_transformers().split(".")[0])
    if major >= 5:
        with pytest.raises(RiskRankError, match=r"transformers 5\.\S+ \(installed\)"):
            cem.require_flax_transformers("monoT5")
    else:
        cem.require_flax_transformers("monoT5")  # transformers 4.x has them
    monkeypatch.setattr(cem, "_installed_transformers", lambda: "5.23.0")
    T5Config(vocab_size=8, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2).save_pretrained(tmp_path / "t5")
    RobertaConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=8).save_pretrained(tmp_path / "roberta")
    for d, what in (("t5", "the monoT5 baseline"), ("roberta", "a 'roberta' sequence classifier")):
        with pytest.raises(RiskRankError, match=r"transformers 5\.23\.0 \(installed\)") as err:
            cem.load_cross_encoder(tmp_path / d)
        assert what in str(err.value) and "pip install 'transformers>=4.57,<5'" in str(err.value)


# ---- (b) a cross-encoder initialised from a bi-encoder, trained, checkpointed


def test_init_from_encoder_takes_the_encoders_weights_and_a_seeded_head(encoder_dir, trained):
    d, enc_params = encoder_dir
    ce0 = trained[0]
    flat, want = flatten_dict(ce0.params), flatten_dict(enc_params)
    for key, arr in want.items():
        np.testing.assert_array_equal(np.asarray(flat[("bert",) + key]), arr)
    assert flat[("classifier", "kernel")].shape == (32, 1) and ce0.kind == "classifier"
    again = cem.init_from_encoder(d)
    np.testing.assert_array_equal(again.params["classifier"]["kernel"], ce0.params["classifier"]["kernel"])
    other = cem.init_from_encoder(d, seed=1)
    assert not np.array_equal(other.params["classifier"]["kernel"], ce0.params["classifier"]["kernel"])


def test_init_from_encoder_params_equal_those_of_transformers_tree(encoder_dir):
    """The BERT tree laid out from the config (``bert_weights.param_shapes``) gives the parameters that reading
    against transformers' FlaxBertForSequenceClassification ``params_shape_tree`` gave: every leaf bit-identical,
    in the same order, the new pooler and head drawn the same from seed 0 (the embedded MiniLM: the committed
    results' cross-encoder; the tiny encoder); no transformers model is kept for BERT."""
    FlaxBertForSequenceClassification = flax_class_or_skip("FlaxBertForSequenceClassification")
    for d in (default_model_dir(), encoder_dir[0]):
        ce = cem.init_from_encoder(d, seed=0)
        config, files = hf.load_config(d, num_labels=1), hf.weight_files(d)
        with hf.quiet_transformers():
            model = FlaxBertForSequenceClassification(config, _do_init=False)
        target = flatten_dict(model.params_shape_tree)
        loaded = hf.read_weight_files(files, target, model.base_model_prefix)
        want = flatten_dict(cem._complete_params(d, files, config, target, loaded, 0))
        got = flatten_dict(ce.params)
        assert list(got) == list(want) and ce.model is None and ce.backend == "bert"
        for key, arr in want.items():
            assert got[key].dtype == np.float32 and np.array_equal(np.asarray(got[key]), arr), key


def _pytorch_layout_copy(src: Path, dst: Path) -> Path:
    """A copy of a Flax-layout safetensors BERT directory with its weights in PyTorch's names and layout
    (``weight`` for kernels, transposed, embeddings and LayerNorm scales; metadata format "pt")."""
    shutil.copytree(src, dst)
    out = {}
    for name, arr in load_file(str(dst / "model.safetensors")).items():
        stem, last = name.rsplit(".", 1)
        arr = np.ascontiguousarray(arr.T) if last == "kernel" else arr  # safetensors writes a view's memory as it is
        out[f"{stem}.{'bias' if last == 'bias' else 'weight'}"] = arr
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


BLOCK_FLAX = """
import importlib.abc, json, re, sys
FLAX = re.compile(r"transformers[.](models[.][^.]+[.])?modeling_flax_[a-z_]+$")
tried = []
class BlockFlax(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if FLAX.match(name):
            tried.append(name)
            raise ImportError(f"blocked: {name} (transformers without Flax code)")
sys.meta_path.insert(0, BlockFlax())
from riskrank_jax.model import cross_encoder as cem
"""


def test_bert_cross_encoders_load_without_transformers_flax_modules(tiny_bert_dir, classifier_dir, tmp_path):
    """In a process where every transformers Flax module (``modeling_flax_*``: the models' Flax classes, the Flax
    base class, the PyTorch-to-Flax utilities, none of which transformers 5 has) fails to import, a BERT
    cross-encoder still loads (``init_from_encoder`` on the tiny encoder, Flax- and PyTorch-layout safetensors;
    ``load_cross_encoder`` on a saved BERT classifier, msgpack) and scores as it does here with them."""
    pt_dir = _pytorch_layout_copy(tiny_bert_dir, tmp_path / "pt")
    queries, texts = ["please key1 the data", "find key2", "delete a file"], ["key1 tool", "key7 service", "rm"]
    code = BLOCK_FLAX + f"""
out = {{}}
models = (("flax", cem.init_from_encoder({str(tiny_bert_dir)!r})), ("pt", cem.init_from_encoder({str(pt_dir)!r})),
          ("classifier", cem.load_cross_encoder({str(classifier_dir[0])!r})))
for label, ce in models:
    out[label] = [ce.backend, ce.score_pairs({queries!r}, {texts!r}).tolist()]
out["tried"] = tried
out["flax_modules"] = sorted(m for m in sys.modules if FLAX.match(m))
print(json.dumps(out))
"""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["tried"] == [] and out["flax_modules"] == []  # the BERT path asks for no Flax module
    here = {"flax": cem.init_from_encoder(tiny_bert_dir), "pt": cem.init_from_encoder(pt_dir),
            "classifier": cem.load_cross_encoder(classifier_dir[0])}
    for label, ce in here.items():
        backend, scores = out[label]
        assert backend == ce.backend == "bert"
        np.testing.assert_allclose(np.asarray(scores, np.float32), ce.score_pairs(queries, texts), atol=1e-6)
    np.testing.assert_array_equal(here["pt"].score_pairs(queries, texts), here["flax"].score_pairs(queries, texts))


def test_training_lowers_the_loss_and_beats_the_untrained_model_on_heldout_queries(trained, task):
    ce0, tuned, report, _ = trained
    losses = np.asarray(report["losses"]).reshape(CONFIG.epochs, -1).mean(1)  # per epoch
    assert losses[-1] < 0.6 * losses[0], losses
    held = report["heldout_queries"]
    assert len(held) == 8 and not set(held) & set(report["train_queries"])
    assert _gold_rank_mean(tuned, task, held) < _gold_rank_mean(ce0, task, held)
    assert report["steps"] == report["steps_run"] == 48 and report["resumed_from"] == 0
    assert report["train_pairs"] == 48 * 8 * 5
    table = report["heldout_ndcg@5_by_gate"]
    assert sorted(table) == list(CONFIG.gates) and report["gate"] == cet.choose_gate(table)
    queries, gold, tools, first = task
    cand = cet.candidates(first, CONFIG.top)[held]
    s = cet.ce_scores_for(tuned, [queries[q] for q in held], tools, cand, batch_size=CONFIG.score_batch_size)
    assert cet.gate_table(first[held], cand, s, gold[held], CONFIG.gates) == table


def test_a_finished_checkpoint_is_reused_and_a_killed_run_resumes(trained, task):
    ce0, tuned, report, ckpt = trained
    queries, gold, tools, first = task
    same, rep2 = cet.train_cross_encoder(ce0, queries, gold, tools, first, 0, CONFIG, checkpoint_dir=ckpt,
                                         progress=False)
    assert rep2["steps_run"] == 0 and rep2["losses"] == report["losses"]
    jax.tree.map(np.testing.assert_array_equal, same.params, tuned.params)
    # what a kill after the checkpoint at step 24 leaves: run.json "running" at 24, no later state
    run = json.loads((ckpt / "run.json").read_text())
    (ckpt / "run.json").write_text(json.dumps({**run, "status": "running", "epochs_done": 24}))
    shutil.rmtree(ckpt / "state" / "48")
    resumed, rep3 = cet.train_cross_encoder(ce0, queries, gold, tools, first, 0, CONFIG, checkpoint_dir=ckpt,
                                            progress=False)
    assert rep3["resumed_from"] == 24 and rep3["steps_run"] == 24 and rep3["losses"] == report["losses"]
    jax.tree.map(np.testing.assert_array_equal, resumed.params, tuned.params)


def test_training_plan_lists_positives_then_first_stage_negatives(task):
    _, gold, _, first = task
    cand = cet.candidates(first, CONFIG.top)
    cfg = cem.CrossEncoderConfig(epochs=2, batch_size=8, negatives=4)
    hard = np.asarray(best_non_gold(first, gold, cfg.negatives))
    plan = cet.training_plan(gold, cand, hard, np.arange(32), 5, cfg)
    assert plan["tools"].shape == (8, 8, 5) and (plan["queries"] >= 0).all()
    for s, r in np.ndindex(*plan["queries"].shape):
        q = plan["queries"][s, r]
        row, pos = plan["tools"][s, r], plan["positive"][s, r]
        assert list(row[pos]) == [gold[q, 0]] and pos[0] and not pos[1:].any()
        assert list(row[1:]) == [t for t in cand[q] if t != gold[q, 0]][:4]  # the best non-gold
    again = cet.training_plan(gold, cand, hard, np.arange(32), 5, cfg)
    assert all(np.array_equal(plan[k], again[k]) for k in plan)
    assert sorted(plan["queries"][:4].reshape(-1)) == list(range(32))  # one epoch covers every query once


# ---- (c) candidates and the gate


def test_rerank_relevance_keeps_the_first_stage_at_gamma_zero_and_the_candidates_scale():
    rng = np.random.default_rng(4)
    first = rng.standard_normal((8, 30)).astype(np.float32)  # the held-out block's shapes: compiled already
    cand = cet.candidates(first, 20)
    ce = rng.standard_normal((8, 20)).astype(np.float32)
    z = np.asarray(zscore(first))
    rel0 = np.asarray(cet.rerank_relevance(first, cand, ce, 0.0))
    np.testing.assert_allclose(rel0, z, atol=1e-6)
    assert np.array_equal(np.argsort(-rel0, axis=1, kind="stable"), np.argsort(-first, axis=1, kind="stable"))
    is_cand = np.zeros(first.shape, bool)
    np.put_along_axis(is_cand, cand, True, axis=1)
    zc = np.take_along_axis(z, cand, axis=1)
    for gamma in (0.25, 0.5, 1.0):
        rel = np.asarray(cet.rerank_relevance(first, cand, ce, gamma))
        np.testing.assert_array_equal(rel[~is_cand], rel0[~is_cand])
        new = np.take_along_axis(rel, cand, axis=1)
        np.testing.assert_allclose(new.mean(1), zc.mean(1), atol=1e-5)
        np.testing.assert_allclose(new.std(1), zc.std(1), atol=1e-5)
    rel1 = np.asarray(cet.rerank_relevance(first, cand, ce, 1.0))
    order = np.argsort(-np.take_along_axis(rel1, cand, axis=1), axis=1, kind="stable")
    assert np.array_equal(order, np.argsort(-ce, axis=1, kind="stable"))  # γ = 1: the CE's order


def test_candidates_ties_go_to_the_lower_index_and_gate_ties_to_the_smaller_gamma():
    assert cet.candidates(np.asarray([[1.0, 3.0, 3.0, 0.0, 3.0]]), 3).tolist() == [[1, 2, 4]]
    assert cet.candidates(np.zeros((2, 4)), 20).shape == (2, 4)
    assert cet.choose_gate({0.0: 0.5, 0.25: 0.5, 0.5: 0.4}) == 0.0
    assert cet.choose_gate({0.0: 0.4, 0.25: 0.6, 0.5: 0.6, 1.0: 0.6}) == 0.25


# ---- (d) baselines offline, (e) bad paths


def test_baseline_without_weights_is_not_run(monkeypatch):
    if isinstance(try_to_load_from_cache(cem.BASELINE_RERANKERS["ce_minilm_l6"], "config.json"), str):
        pytest.skip("ms-marco-MiniLM-L-6-v2 is in this machine's Hugging Face cache")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    assert cem.try_load_baseline("ce_minilm_l6") == "not run: weights absent"
    assert time.perf_counter() - t0 < 10
    assert set(cem.BASELINE_RERANKERS) == set(cem.BASELINE_KINDS) and cem.BASELINE_KINDS["monot5"] == "monot5"
    with pytest.raises(cem.WeightsAbsent, match="ms-marco-MiniLM-L-6-v2"):
        cem.load_cross_encoder("cross-encoder/ms-marco-MiniLM-L-6-v2")


def test_missing_local_path_or_weights_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(RiskRankError, match="no-such-model: no such model directory"):
        cem.load_cross_encoder(missing)
    with pytest.raises(RiskRankError, match="no-such-model"):
        cem.load_cross_encoder(str(missing))
    with pytest.raises(RiskRankError, match="no-such-model"):
        cem.init_from_encoder(missing)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    with pytest.raises(cem.WeightsAbsent, match=str(tmp_path)):
        cem.load_cross_encoder(tmp_path)


def test_a_step_in_backward_chunks_equals_the_whole_step_and_chunks_only_what_the_budget_cannot_hold(
        encoder_dir, task):
    ce = cem.init_from_encoder(encoder_dir[0])
    queries, gold, tools, first = task
    tools_idx = np.argsort(-first[:8], axis=1)[:, :5]  # 8 queries x 5 pairs = 40 pairs
    positive = tools_idx == gold[:8]
    batch = cet.step_batch(ce, tools_idx, positive, np.arange(8), queries, tools, 8)
    opt = optax.sgd(0.5)  # linear in the gradients (Adam would blow a 1e-12 gradient up to a full step)
    results = {}
    for name, rows in (("whole", None), ("chunks of 16", lambda m, length: 16)):
        step = cem._make_step(ce.forward, opt, rows)
        params, state, losses = ce.params, opt.init(ce.params), []
        for _ in range(3):
            params, state, loss = step(params, state, *batch)
            losses.append(float(loss))
        results[name] = (losses, np.concatenate([np.ravel(x) for x in jax.tree.leaves(params)]))
    (l_whole, p_whole), (l_chunk, p_chunk) = results["whole"], results["chunks of 16"]
    assert batch[0].shape[0] == 40 and l_whole[-1] < l_whole[0]  # 40 pairs: 3 chunks, the last padded
    np.testing.assert_allclose(l_chunk, l_whole, rtol=1e-5)
    assert np.abs(p_chunk - p_whole).max() < 1e-5
    # the budget's chunking: a tiny BERT's pairs fit whole; MiniLM-sized pairs of 128 tokens are cut
    assert ce._rows_per_chunk()(48, 128) == 48
    shape = cem.BertShape(num_layers=6, num_heads=12, hidden=384, layer_norm_eps=1e-12, activation="gelu")
    assert 40e6 < cem.train_bytes_per_pair(128, shape) < 55e6  # ~47 MB a pair: 22 pairs per GiB
