"""A hand-written MCP server over stdio (JSON-RPC lines, no SDK) that misbehaves on purpose, for the gateway's
robustness tests: ``python raw_server.py BEHAVIOUR [CALLS_LOG]``.

Behaviours: ``lenient`` (tools without inputSchema, a schema without "type", an unreadable schema, a tool
without a name, invalid annotations), ``duplicates``, ``many`` (10,000 tools in pages of 1,000),
``huge`` (a one-megabyte description), ``hang`` (never answers initialize), ``crash`` (exits in the middle
of a call to ``crash_now``), ``stall`` (never answers a call to ``wait_forever``; logs the cancellation),
``loop`` (sends notifications/tools/list_changed every 10 ms), ``garbage`` (writes lines that are not
JSON-RPC to stdout), ``flap`` (exits ``FLAP_AFTER_S`` seconds after the handshake, for the backoff tests),
``halfmodern`` (answers ``server/discover`` with the newest revision, then fails every request made on it).
Every tools/call and notifications/cancelled it receives is appended to CALLS_LOG as a JSON line.

Why no SDK: the SDK's servers cannot send what these servers send.
"""

import json
import os
import sys
import threading
import time

BEHAVIOUR = sys.argv[1]
CALLS_LOG = sys.argv[2] if len(sys.argv) > 2 else None
LOCK = threading.Lock()


def send(obj) -> None:
    with LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def record(entry) -> None:
    if CALLS_LOG:
        with open(CALLS_LOG, "a") as f:
            f.write(json.dumps({"server": BEHAVIOUR, **entry}) + "\n")


def obj_schema(**props):
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}


def tools_for(behaviour):
    if behaviour == "lenient":
        return [
            {"name": "count_words", "description": "Count the words in a text.", "inputSchema": obj_schema(text="string")},
            {"name": "ping_host", "description": "Check whether a host answers."},  # no inputSchema
            {"name": "list_labels", "description": "List the labels defined in a project.",
             "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#",
                             "properties": {"project": {"type": "string"}}}},  # no "type"
            {"name": "format_disk", "description": "Format a disk partition.", "inputSchema": "see the docs"},
            {"description": "A tool without a name."},
            {"name": "rename_label", "description": "Rename a label.", "inputSchema": obj_schema(label="string"),
             "annotations": {"readOnlyHint": "sometimes"}},
        ]
    if behaviour == "duplicates":
        return [{"name": "lookup_word", "description": "Look up a word in the dictionary.",
                 "inputSchema": obj_schema(word="string")},
                {"name": "lookup_word", "description": "Delete a word from the dictionary.",
                 "inputSchema": obj_schema(word="string")},
                {"name": "spell_check", "description": "Spell-check a sentence.",
                 "inputSchema": obj_schema(text="string")}]
    if behaviour == "many":
        return [{"name": f"metric_{i:05d}", "description": f"Read the value of metric number {i}.",
                 "inputSchema": obj_schema()} for i in range(10_000)]
    if behaviour == "huge":
        return [{"name": "render_poem", "description": "Render a poem. " + "x" * (1 << 20),
                 "inputSchema": obj_schema(title="string")}]
    if behaviour == "crash":
        return [{"name": "crash_now", "description": "Compute the checksum of a build artefact.",
                 "inputSchema": obj_schema(path="string")}]
    if behaviour == "stall":
        return [{"name": "wait_forever", "description": "Wait for the nightly report to be generated.",
                 "inputSchema": obj_schema()}]
    if behaviour == "loop":
        return [{"name": "tide_times", "description": "Get the tide times for a harbour.",
                 "inputSchema": obj_schema(harbour="string")}]
    if behaviour == "garbage":
        return [{"name": "moon_phase", "description": "Get the phase of the moon on a date.",
                 "inputSchema": obj_schema(date="string")}]
    if behaviour == "hang":
        return []
    if behaviour == "flap":
        return [{"name": "coin_flip", "description": "Flip a coin.", "inputSchema": obj_schema()}]
    if behaviour == "halfmodern":
        return [{"name": "roll_dice", "description": "Roll a die.", "inputSchema": obj_schema()}]
    raise SystemExit(f"unknown behaviour {behaviour}")


READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}  # so the tests exercise robustness, not the risk gate
TOOLS = [dict(t, annotations=t.get("annotations", READ_ONLY)) if isinstance(t, dict) else t
         for t in tools_for(BEHAVIOUR)]
PAGE = 1000


def loop_list_changed():
    while True:
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        time.sleep(0.01)


def flap_later():
    time.sleep(float(os.environ.get("FLAP_AFTER_S", "0.2")))
    os._exit(3)


def handle(msg) -> None:
    method, rid = msg.get("method"), msg.get("id")
    if method == "notifications/cancelled":
        record({"cancelled": msg.get("params", {}).get("requestId")})
        return
    if rid is None:
        if method == "notifications/initialized" and BEHAVIOUR == "loop":
            threading.Thread(target=loop_list_changed, daemon=True).start()
        if method == "notifications/initialized" and BEHAVIOUR == "flap":
            threading.Thread(target=flap_later, daemon=True).start()
        return
    if BEHAVIOUR == "halfmodern":
        if method == "server/discover":  # claims the newest revision ...
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "capabilities": {"tools": {"listChanged": True}}, "resultType": "complete",
                "supportedVersions": ["2026-07-28"], "_meta": {"io.modelcontextprotocol/serverInfo": {
                    "name": "raw-halfmodern", "version": "0.0.1"}}}})
            return
        if "io.modelcontextprotocol/protocolVersion" in ((msg.get("params") or {}).get("_meta") or {}):
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "Internal error"}})
            return  # ... and then fails every request made on it
    if method == "initialize":
        if BEHAVIOUR == "hang":
            return
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2024-11-05", "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": f"raw-{BEHAVIOUR}", "version": "0.0.1"}}})
        return
    if method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
        return
    if method == "tools/list":
        start = int((msg.get("params") or {}).get("cursor") or 0)
        page = {"tools": TOOLS[start:start + PAGE]}
        if start + PAGE < len(TOOLS):
            page["nextCursor"] = str(start + PAGE)
        send({"jsonrpc": "2.0", "id": rid, "result": page})
        return
    if method == "tools/call":
        params = msg.get("params") or {}
        record({"tool": params.get("name"), "arguments": params.get("arguments"), "id": rid})
        if params.get("name") == "crash_now":
            os._exit(7)
        if params.get("name") == "wait_forever":
            return  # never answered
        text = f"{params.get('name')} ok"
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
        return
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if BEHAVIOUR == "garbage":
            print("DEBUG: got a request, thinking...", flush=True)  # what a careless print() does
        if os.environ.get("RAW_DEBUG"):
            open(os.environ["RAW_DEBUG"], "a").write(line + "\n")
        handle(json.loads(line))


if __name__ == "__main__":
    main()
