"""User tool registries: read MCP / OpenAI / Anthropic / plain / BEIR tool lists and assess each tool's risk.

    from riskrank_jax.registry import load_registry, tool_text
    reg = load_registry(["examples/mcp_tools.json", "examples/openai_tools.json"])
    reg.names, reg.texts, reg.declared_risk, reg.annotations, reg.warnings, reg.fingerprint()

    loader.py         read files / objects, merge them, namespace colliding names -> `Registry` (registry.py)
    formats.py        format detection; adapters.py  entries -> `Tool` (tool.py) with clear errors
    jsontext.py       JSON that remembers each object's line, for error messages
    risk.py           `assess_risk`: each tool's level 1..5 and its source (declared, learned, keywords, mcp)
    permissions.py    the permission classifier for user registries (word boundaries, inflections, identifiers)
    dimensions.py     what a tool does (mutation, public sink, secret source, untrusted content, execution,
                      money), each with its source, the MCP specification's defaults, and the one level function
    arguments.py      decisions that depend on a call's arguments (one read-only SQL statement, shell commands)
    poisoning.py      instructions aimed at the agent in a tool's description or schema (tool poisoning);
                      poisoning_phrases.py  its table of phrase cues and their trigger-word index
    mcp_risk.py       the learned dimension model over MCP tools (ships `model/mcp_risk_model.npz`)
    mcp_corpus.py     the labelled corpus of real MCP servers' tools, and folds over servers
    labelled.py       labelled tool sets for risk heads
    risk_agreement.py AUC / Spearman of a risk score against audited labels

The learned risk head is `riskrank_jax.model.risk_head`. See docs/registry.md.
Why a layer of its own: user tool lists arrive in many formats, and every one becomes the same `Registry`.
"""

from riskrank_jax.errors import (DuplicateToolError, EmptyRegistryError, MalformedJSONError, RiskHeadError,
                                 ToolSpecError, UnknownFormatError)
from riskrank_jax.registry.formats import ACCEPTED_FORMATS
from riskrank_jax.registry.loader import RegistryWarning, load_registry
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.tool import ANNOTATION_DEFAULTS, Annotations, Tool, tool_text

__all__ = [
    "ACCEPTED_FORMATS", "ANNOTATION_DEFAULTS", "Annotations", "DuplicateToolError", "EmptyRegistryError",
    "MalformedJSONError", "Registry", "RegistryWarning", "RiskHeadError", "Tool", "ToolSpecError",
    "UnknownFormatError", "load_registry", "tool_text",
]
