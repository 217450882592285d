"""Texts to embeddings: a frozen BERT-family sentence encoder in JAX and an on-disk cache.

    encoder.py          `load_encoder` / `load_encoder_lazily`: texts -> float32 [n, d], L2-normalised
    bert.py             the BERT forward pass over packed rows (block-diagonal attention)
    token_packing.py    best-fit-decreasing packing of token sequences into fixed-length rows
    embedding_cache.py  each unique text encoded once per encoder (`EmbeddingCache`, `embed_texts`)
    hf.py               Hugging Face model directories: weight files, safetensors / msgpack / .bin readers, hub
                        snapshots, quiet transformers (the bi-encoder, the tuner and the cross-encoder load through it)

Why packed rows and a cache: the encoder is the slowest stage, so no compute goes to padding or to a text twice.
"""
