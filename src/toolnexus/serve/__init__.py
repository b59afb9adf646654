"""Serving a toolkit over A2A and `/mcp` — arrives with the A2A + serve issue."""

from __future__ import annotations

from typing import Any

__all__ = ["serve_toolkit"]


async def serve_toolkit(toolkit: Any, addr: str, **options: Any) -> Any:
    raise NotImplementedError("toolnexus: Toolkit.serve is not available in this release yet")
