"""The agent `conformance/a2a_tck.py` serves for the A2A TCK: a toolnexus toolkit behind `serve()`.

Run as `python conformance/a2a_agent.py [HOST:PORT]`; it prints its URL on one line and serves
until SIGTERM/SIGINT. The agent keeps every task working until it is canceled, the shape the
TCK's scenarios assume of the agent under test (they list, continue and cancel tasks that are
still working) and the one the reference agent (`a2a_reference_agent.py`) has: the model's first
move on any prompt is to call `work`, a tool that waits until the run is canceled. A blocking
`SendMessage` therefore answers after `blocking_timeout` (0.2 s here) with the task still
`working`, as the profile allows. The model is a plain function (the one fake the project
allows), the server, the store and every wire are the real ones.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from toolnexus import create_in_process_client, tool
from toolnexus.skill import SkillDef
from toolnexus.toolkit import create_toolkit

PROFILE = {"name": "toolnexus TCK agent", "description": "A toolnexus agent served for the A2A TCK",
           "version": "1.0.0", "blocking_timeout": 0.2}


@tool
async def work(task: str) -> str:
    """Work on the task until told to stop."""
    await asyncio.Event().wait()  # canceled with the run
    return "unreachable"


def model(request: dict) -> dict:
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"content": "done: " + str(last["content"])}
    return {"tool_calls": [{"name": "work", "args": {"task": str(last.get("content") or "")}}]}


async def main(addr: str) -> None:
    toolkit = await create_toolkit(builtins=False, extra_tools=[work],
                                   skills=[SkillDef(name="work", content="Works on tasks.",
                                                    description="Works on any task until it is canceled")])
    client = create_in_process_client(model="tck", generate=model)
    handle = await toolkit.serve(addr, client=client, a2a=dict(PROFILE))
    print(handle.url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await handle.stop()
        await toolkit.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0"))
