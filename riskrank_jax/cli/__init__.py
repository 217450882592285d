"""The `riskrank-jax` command line: thin shells over the library, one subcommand per stage.

    main.py     the click group and its subcommands (data, embed, train, evaluate-baseline, graph, registry, ...)
    rank.py     `riskrank-jax rank` and `riskrank-jax fit` over your own tool registries
    serve.py    `riskrank-jax serve`, the MCP gateway's options (riskrank_jax/serve does the work)
    pins.py     `riskrank-jax pins`: review and accept the tool definitions the gateway pinned
    audit_query.py  `riskrank-jax audit`: query the gateway's audit records (the state store)
    options.py  options shared with `python -m riskrank_jax.sweep`, spelled the same in both
    audit.py    `riskrank-jax registry audit`: each tool's level, dimensions, sources and call under the policy

Why a separate folder on top: nothing below it parses arguments or prints, so the library stays callable.
"""
