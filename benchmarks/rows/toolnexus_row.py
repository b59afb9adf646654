"""A row for any toolnexus with the 0.21 API (ours, or the published 0.21.0 in its own venv):
one toolkit with the stdio MCP tools server (one persistent session), one client, `client.run`."""

import asyncio
import os
import sys

import _row as r  # first: starts the clock


async def main() -> None:
    from toolnexus import create_client, create_toolkit

    import_ms = r.since(r.T0)
    version = getattr(sys.modules["toolnexus"], "__version__", "?")
    config = {"mcpServers": {"bench": {"type": "local", "command": [sys.executable, r.TOOLS_SERVER],
                                       "timeout": 30000}}}
    toolkit = await create_toolkit(mcp_config=config, builtins=False)
    style = os.environ.get("BENCH_STYLE", "openai")
    client = create_client(base_url=r.model_url() + "/v1", style=style, model=r.MODEL, api_key=r.API_KEY)

    async def run_once() -> str:
        return (await client.run(r.QUESTION, toolkit)).text

    try:
        result = await r.bench(os.environ.get("BENCH_LABEL", f"toolnexus {version}"), version, run_once, import_ms,
                               {"style": style})
    finally:
        await toolkit.close()
        closer = getattr(client, "aclose", None)
        if closer is not None:
            await closer()
    r.finish(result)


asyncio.run(main())
