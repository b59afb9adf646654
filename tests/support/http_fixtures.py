"""Pytest fixtures shared by the HTTP-tool and OpenAPI tests: a loopback server per test and the
shared httpx pool closed after each test (import them by name into a test module)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from toolnexus.http import aclose_shared_clients

from .http_server import LoopbackServer

__all__ = ["server", "close_pool"]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
async def close_pool() -> AsyncIterator[None]:
    yield
    await aclose_shared_clients()
