"""serve/: `riskrank-jax serve`, a risk-aware MCP gateway in front of an agent's MCP servers.

Modules, top to bottom:

* ``gateway``        — the gateway's state: downstream servers, the current catalog rebuilt when their tools
                       change, what the gate knows of a tool now, the audit line before forwarding, stdio and
                       streamable HTTP;
* ``catalog``        — every tool ranked by one ``Ranker``: building it, searches, what an agent sees of a tool
                       and what a call of it would do;
* ``mcp_app``        — its MCP surface on the SDK's ``MCPServer``: ``search_tools``, ``call_tool`` (with
                       elicitation), ``list_servers``, or ``--expose filtered``; it only translates decisions;
* ``http_guard``     — the HTTP transport's guard: Host and Origin for every bind address, the bearer token,
                       request size;
* ``operate``        — running the HTTP gateway as a service: /healthz, /readyz, /metrics (Prometheus), the drain
                       on SIGTERM, JSON log lines;
* ``downstream``     — one supervised MCP client per downstream server: list all pages leniently (invalid tools
                       named, not fatal), watch list_changed, restart with a backoff that settles, forward calls
                       with a timeout, progress and cancellation;
* ``bounded_stdio``  — the stdio transport to a downstream server with a cap on each message it reads;
* ``results``        — a downstream result cut to ``limits.max_result_bytes``, the agent told what was cut;
* ``config``         — the gateway's settings, one tree (``GatewaySettings``): the ``mcpServers`` JSON plus
                       ``registries``, ``policy``, ``limits``, ``rank``, ``http`` and ``runtime``, read with
                       file:line errors, shown with its secrets hidden;
* ``policy``         — `decide_call`, the one function that decides a call (allow, ask, refuse) and says why;
* ``call_arguments`` — a call's arguments checked before they leave: the tool's input schema, secrets, secret
                       file paths;
* ``pins``           — each tool's definition pinned at first sight in the state store; changes marked until
                       accepted;
* ``sessions``       — each MCP session's flow and the user's answers to confirmations, in the state store;
* ``identity``       — one identity per tool, ``server.tool``, the MCP specification's name rules, and how
                       foreign text is shown;
* ``audit``          — one record per call decision in the state store, written before the call is forwarded
                       and completed with its outcome, a keyed digest of the arguments; the JSON Lines export;
* ``store``          — the state store: one schema with versioned migrations, SQLite in the state directory or
                       the PostgreSQL database replicas share; unavailable means refused;
* ``sdk_hooks``      — the MCP SDK's private parts the gateway relies on, one function each.

Why its own folder: the gateway is a transport around the ``Ranker``; it adds no second ranking path.
"""
