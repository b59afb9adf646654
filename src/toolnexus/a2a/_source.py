"""Remote A2A agents as a toolkit source: the `agents` option plus the config's `agents` block.

Agents resolve concurrently; one whose card cannot be fetched is reported on stderr and adds no
tools, so one agent being down does not stop the toolkit from loading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Optional

from .._diag import warn
from ..tool_source import ToolList
from ..types import Tool
from ._descriptor import RemoteAgent, parse_agents_config
from ._tool import agent_tools


async def agents_source(agents: Optional[list[RemoteAgent]] = None,
                        config: Optional[Mapping[str, Any]] = None) -> ToolList:
    """The tools of `agents` and of the agents `config["agents"]` describes (a dict block), in order."""
    every = list(agents or [])
    block = (config or {}).get("agents")
    if isinstance(block, dict):
        every += parse_agents_config(block)
    return ToolList("a2a", await _resolve(every) if every else [])


async def _resolve(every: list[RemoteAgent]) -> list[Tool]:
    results = await asyncio.gather(*(agent_tools(a) for a in every), return_exceptions=True)
    tools: list[Tool] = []
    for ag, res in zip(every, results, strict=True):
        if isinstance(res, BaseException):
            if not isinstance(res, Exception):
                raise res
            warn(f'[toolnexus] A2A agent "{ag.card}" failed: {res}')
            continue
        tools += res
    return tools
