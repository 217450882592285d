"""One tool of a user registry, whatever format it came from, and the text it is embedded with.

Why one record: every accepted format becomes the same Tool, so later code never asks which it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from riskrank_jax.permissions import split_identifier

# MCP ToolAnnotations defaults (specification of November 2025): they apply when a hint is absent or null.
ANNOTATION_DEFAULTS: dict[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


@dataclass(frozen=True)
class Annotations:
    """MCP tool annotations with the specification's defaults applied.

    `declared` holds the hint names the server actually sent (true or false); the others took their default.
    Hints come from possibly untrusted servers: see `riskrank_jax.registry.risk` for how they are used.
    """

    read_only: bool = ANNOTATION_DEFAULTS["readOnlyHint"]
    destructive: bool = ANNOTATION_DEFAULTS["destructiveHint"]
    idempotent: bool = ANNOTATION_DEFAULTS["idempotentHint"]
    open_world: bool = ANNOTATION_DEFAULTS["openWorldHint"]
    title: str | None = None
    declared: frozenset[str] = frozenset()

    def declared_true(self, hint: str) -> bool:
        """True when the server sent `hint: true` (not merely the default)."""
        return hint in self.declared and self.as_dict()[hint]

    def as_dict(self) -> dict[str, bool]:
        return {"readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent, "openWorldHint": self.open_world}


@dataclass(frozen=True)
class Tool:
    """A tool as read from one source.

    name: its unique name in the registry (`source/raw_name` when raw_name collides across sources);
    params: (name, description) of the input schema's top-level properties;
    declared_risk: the entry's own `risk` (1..5) or None;
    annotations: MCP annotations (defaults applied) or None for formats that have none;
    source: the source's name (file stem, or the MCP server's name); path/line: where the entry is.
    """

    name: str
    raw_name: str
    description: str
    format: str
    source: str
    title: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    declared_risk: int | None = None
    annotations: Annotations | None = None
    path: str | None = None
    line: int | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        """`path:line` (or what is known of it) for messages."""
        if self.path is None:
            return f"<{self.source}>"
        return self.path if self.line is None else f"{self.path}:{self.line}"


def tool_text(tool: Tool) -> str:
    """The text a tool is embedded with (and the learned risk head reads).

    Layout, with empty parts left out:

        "<name words>: <title>. <description> Parameters: <p1 words> (<p1 description>); <p2 words>."

    * name words: the raw name split into lower-case words ("deleteRepo", "delete_repo" -> "delete repo");
      the namespace a collision adds is not part of it, so merging files does not change a tool's text;
    * title: the MCP `title` (or annotations.title) when it is not just the name again;
    * parameters: the input schema's top-level properties in schema order, each with its description.
    """
    head = split_identifier(tool.raw_name).strip()
    title = (tool.title or (tool.annotations.title if tool.annotations else None) or "").strip()
    if title and split_identifier(title).strip() != head:
        head = f"{head}: {title.rstrip('.')}."
    else:
        head = f"{head}:"
    parts = [head]
    if tool.description.strip():
        parts.append(" ".join(tool.description.split()))
    if tool.params:
        ps = [split_identifier(n).strip() + (f" ({' '.join(d.split())})" if d.strip() else "") for n, d in tool.params]
        parts.append("Parameters: " + "; ".join(ps) + ".")
    return " ".join(parts)
