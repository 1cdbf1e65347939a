"""Drives `ba-agent mcp serve` with the Python `mcp` package, a client written by others.

    client.py stdio BA_AGENT CONFIG CSV CODE
    client.py http URL TOKEN CSV CODE

Lists the tools, reads CSV with file_reader, runs CODE with run_python, reads every prompt
(the skills) and every resource (the conversations), then prints one JSON object saying what
the client saw. With MCP_ELICIT=accept or decline in the environment
the client declares elicitation and answers every question that way, recording each message.
"""

import asyncio
import json
import os
import sys

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


async def exercise(read, write, csv, code):
    asked = []
    answer = os.environ.get("MCP_ELICIT")

    async def elicit(_context, params):
        asked.append(params.message)
        return ElicitResult(action=answer)

    callback = elicit if answer else None
    async with ClientSession(read, write, elicitation_callback=callback) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        reader = await session.call_tool("file_reader", {"path": csv})
        python = await session.call_tool("run_python", {"code": code})
        prompts = await session.list_prompts()
        skills = {}
        for prompt in prompts.prompts:
            got = await session.get_prompt(prompt.name)
            skills[prompt.name] = got.messages[0].content.text
        resources = await session.list_resources()
        conversations = {}
        for resource in resources.resources:
            read = await session.read_resource(resource.uri)
            conversations[resource.name] = json.loads(read.contents[0].text)
        return {
            "server": init.serverInfo.name,
            "tools": sorted(t.name for t in tools.tools),
            "file_reader": {"is_error": bool(reader.isError), "text": text_of(reader)},
            "run_python": {"is_error": bool(python.isError), "text": text_of(python)},
            "asked": asked,
            "skills": skills,
            "conversations": conversations,
        }


async def main(argv):
    mode, target, extra, csv, code = argv[1:6]
    if mode == "stdio":
        params = StdioServerParameters(command=target, args=["mcp", "serve", "--config", extra])
        async with stdio_client(params) as (read, write):
            seen = await exercise(read, write, csv, code)
    else:
        headers = {"Authorization": "Bearer " + extra}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(target, http_client=http) as (read, write, _):
                seen = await exercise(read, write, csv, code)
    print(json.dumps(seen))


asyncio.run(main(sys.argv))
