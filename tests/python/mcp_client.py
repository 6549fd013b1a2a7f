#!/usr/bin/env python3
"""`memscope mcp` under the official MCP Python SDK's client (`pip install mcp`): the session an
agent runs to debug an OOM. Prints a transcript (docs/mcp.md shows one) and exits non-zero when
the server's answers are not what the SDK expects or the OOM is not found.

Usage: python tests/python/mcp_client.py MEMSCOPE_BINARY fixtures/leak_oom.pickle
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def short(v, n=400):
    s = json.dumps(v)
    return s if len(s) <= n else s[:n] + f"... ({len(s)} characters)"


async def main(binary, capture):
    params = StdioServerParameters(command=binary, args=["mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print(f"initialize -> {init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}")
            tools = await session.list_tools()
            print("tools/list ->", ", ".join(t.name for t in tools.tools))
            r = await session.call_tool("analyze", {"path": capture})
            assert not r.is_error, r
            print("tools/call analyze ->")
            print("  text:", r.content[0].text.replace("\n", "\n        "))
            print("  structuredContent:", short(r.structured_content))
            ooms = [o for d in r.structured_content["devices"] for o in d["ooms"]]
            assert ooms, "no OOM in the report"
            sql = ("SELECT l.file, l.line, COUNT(*) AS blocks, SUM(l.size) AS bytes "
                   "FROM ooms o JOIN live l ON l.moment = 'oom' AND l.at_event = o.event "
                   "GROUP BY l.site_id ORDER BY bytes DESC")
            r = await session.call_tool("query", {"path": capture, "sql": sql, "max_rows": 3})
            assert not r.is_error, r
            print(f"tools/call query {sql!r} ->")
            print("  text:", r.content[0].text.replace("\n", "\n        "))
            print("  structuredContent:", short(r.structured_content, 600))
            r = await session.call_tool("check", {"paths": [capture]})
            print("tools/call check ->", "passed" if r.structured_content["passed"] else "failed")
            assert r.structured_content["passed"] is False
            r = await session.call_tool("query", {"path": capture, "sql": "DELETE FROM ooms"})
            print("tools/call query 'DELETE FROM ooms' -> isError", r.is_error, "|", r.content[0].text)
            assert r.is_error


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
