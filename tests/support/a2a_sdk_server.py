"""A real `a2a-sdk` 1.x server on loopback, for testing our outbound A2A tool against the SDK.

`sdk_agent(compat=False)` serves the SDK's own request handler, JSON-RPC routes and card routes
(via our listener, on the test's loop). Two cards: `/.well-known/agent-card.json` (the 1.0
interface, plus the 0.3 one when `compat`) and, with `compat`, `/legacy-card.json` offering only
the 0.3 interface, so a caller that follows it speaks 0.3 to the SDK's compatibility layer.

The executor: `ask …` → `input-required` ("What is your name?"); a follow-up on that task →
`completed` with `hello <text>`; `sign in` → `auth-required`; anything else → `completed` with
`sdk echo: <text>`. `seen` records each request's method and `A2A-Version` header.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from a2a.helpers.proto_helpers import get_message_text, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

from toolnexus.serve._limits import ServeLimits
from toolnexus.serve._listener import start_listener

__all__ = ["sdk_agent"]


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        text = get_message_text(context.message) if context.message else ""
        current = context.current_task
        if current is None:  # the SDK wants the Task itself first
            await event_queue.enqueue_event(pb.Task(
                id=context.task_id or "", context_id=context.context_id or "",
                status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED)))
        await updater.start_work()
        if current is not None and current.status.state == pb.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"hello {text}")])
            await updater.complete()
        elif text.startswith("ask"):
            await updater.requires_input(updater.new_agent_message([new_text_part("What is your name?")]))
        elif text.startswith("sign in"):
            await updater.requires_auth(updater.new_agent_message([new_text_part("Please sign in")]))
        else:
            await updater.add_artifact([new_text_part(f"sdk echo: {text}")])
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


class _Recorder:
    """ASGI middleware noting each JSON-RPC method and A2A-Version header."""

    def __init__(self, app: Any, seen: list[tuple[str, str]]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[dict] = []
        while True:
            message = await receive()
            chunks.append(message)
            if message.get("type") != "http.request" or not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in chunks)
        try:
            method = json.loads(body).get("method", "")
        except ValueError:
            method = ""
        version = next((v.decode() for k, v in scope.get("headers", []) if k == b"a2a-version"), "")
        self.seen.append((method, version))

        async def replay() -> dict:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


def _card(url: str, versions: tuple[str, ...]) -> pb.AgentCard:
    return pb.AgentCard(
        name="SDK Agent", description="an a2a-sdk agent", version="1.0.0",
        supported_interfaces=[pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v)
                              for v in versions],
        capabilities=pb.AgentCapabilities(streaming=False),
        default_input_modes=["text"], default_output_modes=["text"],
        skills=[pb.AgentSkill(id="echo", name="echo", description="Echoes", tags=["echo"])],
    )


@asynccontextmanager
async def sdk_agent(*, compat: bool = False) -> AsyncIterator[Any]:
    """Yields an object with `url`, `card_url`, `legacy_card_url` (compat only) and `seen`."""
    seen: list[tuple[str, str]] = []
    holder: dict[str, Any] = {}

    async def app(scope: dict, receive: Any, send: Any) -> None:
        await holder["app"](scope, receive, send)

    handle = await start_listener(app, "127.0.0.1:0", limits=ServeLimits(drain_timeout=0))
    rpc_url = handle.url + "/a2a/v1"
    versions = ("1.0", "0.3") if compat else ("1.0",)
    card = _card(rpc_url, versions)
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/a2a/v1", enable_v0_3_compat=compat)
    if compat:
        routes += create_agent_card_routes(_card(rpc_url, ("0.3",)), card_url="/legacy-card.json")
    holder["app"] = _Recorder(Starlette(routes=routes), seen)

    class Agent:
        url = handle.url
        card_url = handle.url + "/.well-known/agent-card.json"
        legacy_card_url = handle.url + "/legacy-card.json"

    Agent.seen = seen  # type: ignore[attr-defined]
    try:
        yield Agent
    finally:
        await handle.stop()
