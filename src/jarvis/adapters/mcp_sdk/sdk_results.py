"""The SDK's tool listings and call results as jarvis's values, bounded: how many tools
one server may list, and what a content block may carry."""

from __future__ import annotations

import base64
import binascii
from typing import cast

import mcp_types as types
from mcp.client.session import ClientSession

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.mcp import McpCallResult, McpContent, McpError, McpToolInfo

MAX_TOOLS = 1000
"""Tools listed from one server at most (pages beyond are not asked for)."""
MAX_LIST_PAGES = 50


async def list_tools(session: ClientSession) -> tuple[McpToolInfo, ...]:
    tools: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await session.list_tools(params=params)
        tools.extend(_tool_info(tool) for tool in listed.tools)
        cursor = listed.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tuple(tools[:MAX_TOOLS])


def _tool_info(tool: types.Tool) -> McpToolInfo:
    annotations = tool.annotations
    schema = cast("JSONObject", tool.input_schema) if isinstance(tool.input_schema, dict) else {}
    return McpToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=schema or {"type": "object"},
        title=tool.title or (annotations.title if annotations and annotations.title else "") or "",
        read_only=annotations.read_only_hint if annotations else None,
        destructive=annotations.destructive_hint if annotations else None,
    )


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _content(block: object) -> McpContent:
    if isinstance(block, types.TextContent):
        return McpContent(kind="text", text=block.text)
    if isinstance(block, types.ImageContent):
        return McpContent(
            kind="image", mime_type=block.mime_type, size_bytes=_decoded_size(block.data)
        )
    if isinstance(block, types.AudioContent):
        return McpContent(
            kind="audio", mime_type=block.mime_type, size_bytes=_decoded_size(block.data)
        )
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return McpContent(
                kind="resource",
                text=resource.text,
                uri=str(resource.uri),
                mime_type=resource.mime_type or "",
            )
        return McpContent(
            kind="resource",
            uri=str(resource.uri),
            mime_type=resource.mime_type or "",
            size_bytes=_decoded_size(resource.blob),
        )
    if isinstance(block, types.ResourceLink):
        return McpContent(
            kind="resource_link",
            uri=str(block.uri),
            text=block.description or block.name,
            mime_type=block.mime_type or "",
        )
    return McpContent(kind="text", text=f"[a {type(block).__name__} block]")


def call_result(result: object) -> McpCallResult:
    if not isinstance(result, types.CallToolResult):
        raise McpError("the server answered the call with no tool result", server="")
    structured = result.structured_content
    return McpCallResult(
        content=tuple(_content(block) for block in result.content),
        structured=cast("JSONValue", structured) if structured is not None else None,
        is_error=result.is_error,
    )
