"""serve/: `riskrank-jax serve`, a risk-aware MCP gateway in front of an agent's MCP servers.

Modules, top to bottom:

* ``gateway``    — the gateway's state: the catalog it ranks with (one ``Ranker``), searches, the gate, the audit
                   line before forwarding, stdio and streamable HTTP;
* ``mcp_app``    — its MCP surface on the SDK's ``MCPServer``: ``search_tools``, ``call_tool`` (with elicitation),
                   ``list_servers``, or ``--expose filtered``;
* ``downstream`` — one supervised MCP client per downstream server: list all pages leniently (invalid tools
                   named, not fatal), watch list_changed, restart with a backoff that settles, forward calls
                   with a timeout, progress and cancellation;
* ``config``     — the ``mcpServers`` JSON (plus ``registries``, ``policy`` and ``limits``), read with file:line
                   errors;
* ``policy``     — which calls go through, need confirmation, or are refused, and why;
* ``audit``      — the JSON Lines audit log, flushed to disk before a call is forwarded.

Why its own folder: the gateway is a transport around the ``Ranker``; it adds no second ranking path.
"""
