"""The reference agent for the A2A TCK figures: the official `a2a-sdk` server, side by side with ours.

Run as `python conformance/a2a_reference_agent.py [HOST:PORT]`; it prints its URL on one line and
serves until SIGTERM/SIGINT. The SDK's own request handler, task store, JSON-RPC and card routes
(A2A 1.0) on uvicorn; its executor, like ours (`a2a_agent.py`), keeps every task working until it is
canceled: it records the task, sets it working and returns. The card says what ours says (name
aside), so both are held to the same capability tests.
"""

from __future__ import annotations

import sys

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette


class WorkingExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None:  # the SDK wants the Task itself first
            await event_queue.enqueue_event(pb.Task(
                id=context.task_id or "", context_id=context.context_id or "",
                status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED),
                history=[context.message] if context.message else []))
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").start_work()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def app(url: str) -> Starlette:
    card = pb.AgentCard(
        name="a2a-sdk reference agent", description="The a2a-sdk server, served for the A2A TCK", version="1.0.0",
        supported_interfaces=[pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=pb.AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text"], default_output_modes=["text"],
        skills=[pb.AgentSkill(id="work", name="work", description="Works on any task until it is canceled",
                              tags=["work"])],
    )
    handler = DefaultRequestHandler(agent_executor=WorkingExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/"))


def main(addr: str) -> None:
    import socket

    host, _, port = addr.rpartition(":")
    sock = socket.socket()
    sock.bind((host or "127.0.0.1", int(port)))
    sock.listen(128)  # callers queue until uvicorn accepts
    url = f"http://localhost:{sock.getsockname()[1]}"  # what a card served on loopback says (as ours)
    server = uvicorn.Server(uvicorn.Config(app(url + "/"), log_level="warning"))
    print(url, flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0")
