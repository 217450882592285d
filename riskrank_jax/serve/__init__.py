"""serve/: `riskrank-jax serve`, a risk-aware MCP gateway in front of an agent's MCP servers.

Modules, top to bottom:

* ``gateway``    — the MCP server the agent connects to (``search_tools``, ``call_tool``, ``list_servers``, or
                   ``--expose filtered``), the catalog it ranks with, stdio and streamable HTTP;
* ``downstream`` — one supervised MCP client per downstream server: list all pages, watch list_changed,
                   restart with backoff, forward calls;
* ``config``     — the ``mcpServers`` JSON (plus ``registries`` and ``policy``), read with file:line errors;
* ``policy``     — which calls go through, need confirmation, or are refused, and why;
* ``audit``      — the JSON Lines audit log, flushed to disk before a call is forwarded.

Why its own folder: the gateway is a transport around the ``Ranker``; it adds no second ranking path.
"""
