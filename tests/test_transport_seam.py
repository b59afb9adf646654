"""One async transport seam inside; whatever a user passes is adapted once, where it enters; and
the client's parts are reached through their public faces only."""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any

import pytest

from support.llm_server import openai_sse, openai_text
from toolnexus import create_client
from toolnexus.client._http11 import Http11Transport
from toolnexus.client._transport import AsyncTransport, TransportAdapter, as_async_transport
from toolnexus.errors import ToolnexusTypeError

SRC = Path(__file__).resolve().parents[1] / "src" / "toolnexus"


class PlainTransport:
    """The public `HttpTransport` shape: plain methods (the seed's scripted transport is one)."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def post(self, url: str, headers: dict, payload: dict, timeout: float) -> Any:
        self.threads.append(threading.current_thread().name)
        return openai_text("plain")

    def open(self, url: str, headers: dict, payload: dict, timeout: float) -> Any:
        self.threads.append(threading.current_thread().name)
        return _Lines("".join(openai_sse("streamed")).encode())


class _Lines:
    def __init__(self, body: bytes) -> None:
        self.body, self.closed = body, False

    def read1(self, n: int) -> bytes:
        chunk, self.body = self.body[:n], self.body[n:]
        return chunk

    def close(self) -> None:
        self.closed = True


class AsyncDuck:
    """Not an `AsyncTransport` subclass, but `async def post`: awaited, never put on a thread."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    async def post(self, url: str, headers: dict, payload: dict, timeout: float) -> Any:
        self.threads.append(threading.current_thread().name)
        return openai_text("async")


def test_our_transports_are_the_seam_and_anything_else_is_adapted_once():
    ours = Http11Transport()
    assert as_async_transport(ours) is ours and isinstance(ours, AsyncTransport)
    plain, duck = as_async_transport(PlainTransport()), as_async_transport(AsyncDuck())
    assert isinstance(plain, TransportAdapter) and plain.plain_post
    assert isinstance(duck, TransportAdapter) and not duck.plain_post


def test_a_transport_without_post_is_refused_where_it_enters():
    with pytest.raises(ToolnexusTypeError, match="has no post"):
        create_client(base_url="http://x/v1", style="openai", model="m", api_key="k", http_transport=object())


async def test_plain_methods_run_on_the_transport_pool_and_async_ones_on_the_loop():
    plain = PlainTransport()
    client = create_client(base_url="http://x/v1", style="openai", model="m", api_key="k", http_transport=plain)
    assert (await client.run("q")).text == "plain"
    assert (await client.ask("q", on_text=lambda d: None)).text == "streamed"
    assert all(name.startswith("toolnexus-transport") for name in plain.threads) and len(plain.threads) == 2
    assert client._http_transport is plain  # the client keeps what was supplied

    duck = AsyncDuck()
    client = create_client(base_url="http://x/v1", style="openai", model="m", api_key="k", http_transport=duck)
    assert (await client.run("q")).text == "async"
    assert duck.threads == [threading.current_thread().name]


def _private_reaches(path: Path) -> list[str]:
    """`<something named client>._private` attribute reads in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name == "client":
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {name}.{node.attr}")
    return found


def test_no_module_outside_the_client_class_reaches_into_its_privates():
    reaches = [hit for path in sorted(SRC.rglob("*.py")) if path != SRC / "client" / "client.py"
               for hit in _private_reaches(path)]
    assert reaches == []
