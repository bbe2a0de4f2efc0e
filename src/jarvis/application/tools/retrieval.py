"""The ``retrieval`` tool: search the memory backend and show the hits with their sources."""

from __future__ import annotations

from typing import Final, Protocol

from jarvis.application.tools.arguments import integer_argument
from jarvis.domain.json_types import JSONObject
from jarvis.domain.run.contract import MemoryHit
from jarvis.domain.tools.specs import ToolResult, ToolSpec

MAX_TOP_K: Final = 20
DEFAULT_TOP_K: Final = 5
NO_RESULTS: Final = "No relevant results found."

RETRIEVAL_SPEC: Final = ToolSpec(
    name="retrieval",
    description=(
        "Search the stored memory (notes and documents indexed earlier) for passages "
        "relevant to a query. Returns the best matches with their sources."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Keywords or a question to look up."},
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOP_K,
                "description": f"How many passages to return (default {DEFAULT_TOP_K}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    category="memory",
    timeout_seconds=15.0,
)


class MemorySearch(Protocol):
    """What ``retrieval`` needs: a ``MemoryPort``'s search, or the knowledge base's."""

    async def search(self, query: str, *, top_k: int = 5) -> list[MemoryHit]: ...


def format_hits(hits: list[MemoryHit]) -> str:
    """Numbered passages, each headed by its source and score."""
    blocks = []
    for number, hit in enumerate(hits, start=1):
        source = hit.source or "unknown"
        if hit.line:
            source += f":{hit.line}"
        blocks.append(f"[{number}] source: {source} (score {hit.score:.2f})\n{hit.content}")
    return "\n\n".join(blocks)


class RetrievalTool:
    def __init__(self, memory: MemorySearch) -> None:
        self.memory = memory

    @property
    def spec(self) -> ToolSpec:
        return RETRIEVAL_SPEC

    async def execute(self, arguments: JSONObject) -> ToolResult:
        query = arguments.get("query")
        top_k = integer_argument(arguments, "top_k", default=DEFAULT_TOP_K, low=1, high=MAX_TOP_K)
        if not isinstance(query, str) or not query.strip():
            return ToolResult(
                tool_name="retrieval",
                content="Error: 'query' must be a non-empty string.",
                success=False,
            )
        if top_k is None:
            return ToolResult(
                tool_name="retrieval",
                content=f"Error: 'top_k' must be an integer from 1 to {MAX_TOP_K}.",
                success=False,
            )
        hits = await self.memory.search(query, top_k=top_k)
        if not hits:
            return ToolResult(tool_name="retrieval", content=NO_RESULTS, metadata={"hits": 0})
        return ToolResult(
            tool_name="retrieval", content=format_hits(hits), metadata={"hits": len(hits)}
        )
