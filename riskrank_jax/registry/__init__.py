"""User tool registries: read MCP / OpenAI / Anthropic / plain / BEIR tool lists and assess each tool's risk.

    from riskrank_jax.registry import load_registry, tool_text
    reg = load_registry(["examples/mcp_tools.json", "examples/openai_tools.json"])
    reg.names, reg.texts, reg.declared_risk, reg.annotations, reg.warnings, reg.fingerprint()

Risk assessment (`assess_risk`) lives in `riskrank_jax.registry.risk`; the learned risk head in
`riskrank_jax.model.risk_head`. See docs/registry.md.
"""

from riskrank_jax.errors import (
    DuplicateToolError,
    EmptyRegistryError,
    MalformedJSONError,
    RiskHeadError,
    ToolSpecError,
    UnknownFormatError,
)
from riskrank_jax.registry.formats import ACCEPTED_FORMATS
from riskrank_jax.registry.loader import RegistryWarning, load_registry
from riskrank_jax.registry.registry import Registry
from riskrank_jax.registry.tool import ANNOTATION_DEFAULTS, Annotations, Tool, tool_text

__all__ = [
    "ACCEPTED_FORMATS", "ANNOTATION_DEFAULTS", "Annotations", "DuplicateToolError", "EmptyRegistryError",
    "MalformedJSONError", "Registry", "RegistryWarning", "RiskHeadError", "Tool", "ToolSpecError",
    "UnknownFormatError", "load_registry", "tool_text",
]
