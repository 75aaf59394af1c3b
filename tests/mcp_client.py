"""A real MCP client for the tests: the official ``mcp`` SDK's ``ClientSession``, over ``stdio_client``
(the server started as a client starts it) or over streamable HTTP.

    async with stdio_session(["mempalace-pg", "mcp", "--palace", P], env) as client:
        tools = await client.tool_names()
        answer = await client.call("pg_hybrid_search", query="...")
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Optional

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

BIN = Path(sys.executable).parent
MEMPALACE_PG = str(BIN / "mempalace-pg")


class ToolFailed(AssertionError):
    """A tool call the test expected to succeed came back as an error."""


class Client:
    def __init__(self, session: ClientSession):
        self.session = session

    async def tool_names(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]

    async def tools(self) -> dict:
        return {t.name: t for t in (await self.session.list_tools()).tools}

    async def result(self, name: str, **arguments):
        """The raw CallToolResult."""
        return await self.session.call_tool(name, arguments)

    async def call(self, name: str, **arguments) -> Any:
        """A successful tool's answer (its structured content, else its text parsed as JSON)."""
        result = await self.result(name, **arguments)
        if result.is_error:
            raise ToolFailed(f"{name} failed: {text_of(result)}")
        if result.structured_content is not None:
            return result.structured_content
        return json.loads(text_of(result))

    async def error(self, name: str, **arguments) -> str:
        """The message of a tool call that must fail (as an MCP tool error)."""
        result = await self.result(name, **arguments)
        assert result.is_error, f"{name} should have failed, answered {text_of(result)[:500]}"
        return text_of(result)


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


@contextlib.asynccontextmanager
async def stdio_session(command: list[str], env: dict, errlog=None) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield Client(session)


@contextlib.asynccontextmanager
async def http_session(url: str, token: Optional[str] = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield Client(session)


def pg_server(palace: Path) -> list[str]:
    """The command line an MCP client's configuration gives for this plugin's server."""
    return [MEMPALACE_PG, "mcp", "--palace", str(palace)]


def mempalace_server(palace: Path) -> list[str]:
    """MemPalace's own MCP server, as its docs configure it."""
    return [sys.executable, "-m", "mempalace.mcp_server", "--palace", str(palace)]
