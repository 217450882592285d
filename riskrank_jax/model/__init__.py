"""Trainable models over frozen embeddings (and the encoder itself), and how they are trained and stored.

    heads.py       dual heads f_rel(q, t) and f_risk(t) as pure functions of a params dict
    train_config.py what a heads' training run is: its config, model order, random keys and result
    triplets.py    the heads' training triplets, built on the device for every model at once
    train.py       every (seed, fold[, λ]) model of a run trained in one jitted program
    train_store.py a run's state and its per-epoch checkpoints, and a finished run read back
    heldout.py     the one held-out split and gate rule of every learned stage
    negatives.py   the one hard-negative picker: a query's best non-gold tools
    groups.py      the model axis split into byte-sized groups; vmap or lax.map over it
    checkpoints.py per-epoch orbax checkpoints, resumed or set aside when stale
    rerank.py      the correction reranker over a first stage (beyond the paper)
    encoder_tune.py the encoder's top layers fine-tuned on (query, gold tool) pairs (beyond the paper): the run,
                   its checkpoints and evaluation (train_and_evaluate), over the four modules below
    tune_config.py what a tuning run is: its settings and the run lengths they imply
    text_states.py the frozen lower layers' token states of texts, cached, and their packing into rows
    tune_batches.py a tuning run's batches of (query, gold tool, hard negatives), drawn up front per seed
    tune_step.py   the tuning loss and the jitted train step of a group of models
    tuned_encoder.py a tuned encoder: its top layers, its vectors, and the BERT directory it is saved as
    registry_adapt.py relevance adapted to one registry without a log: the top layers tuned on pairs of its own
                   texts, kept when they beat the frozen encoder on held-out pairs, cached by registry
    cross_encoder.py a (query, tool text) pair model: config, loading, forward (BERT through encode/bert.py)
    cross_encoder_train.py the cross-encoder trained on a benchmark's queries and gated onto the first stage's
                   top candidates
    risk_head.py   the stand-alone risk head for user registries (ships `demo_minilm_head.npz`)
    intent_model.py P(effect | request): the learned source of a request's needed effects (ships `intent_model.npz`)

Why stacked params: one program trains and scores every model at once, and a model does not depend on its neighbours.
"""
