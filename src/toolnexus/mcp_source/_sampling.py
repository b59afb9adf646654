"""Answering a server's `sampling/createMessage` with our model, under the host's policy.

A server that samples spends our tokens on a prompt it wrote, so nothing is answered unless the
host's `SamplingPolicy` lists the server; only then is the `sampling` capability advertised to
it. Each request is held to the policy: `maxTokens` capped at `max_tokens`, at most
`max_requests` per connection, and the host's `approve(event)` (when given) may refuse it. The
messages (text and images; the server's `systemPrompt`) go to the policy's client in one
provider call (`translate`), and the reply goes back as the MCP result (`role: assistant`, text
content, the model's name, `stopReason: endTurn`). A refused or failed request is a JSON-RPC error
to the server with the reason; nothing is raised into the connection.

Not here: the server's tools offered to the model (a sampling request with `tools` is answered
without them), `includeContext` (no other server's context is shared).
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

from ..errors import ToolnexusRuntimeError
from ._options import SamplingPolicy


class SamplingRefused(ToolnexusRuntimeError):
    """The policy refused a sampling request; the message (sent to the server) says why."""


def _messages(params: dict[str, Any]) -> list[dict[str, Any]]:
    """MCP sampling messages as chat messages (text parts joined, images kept as image parts)."""
    out: list[dict[str, Any]] = []
    for message in params.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = "assistant" if message.get("role") == "assistant" else "user"
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        parts: list[dict[str, Any]] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append({"type": "text", "text": block["text"]})
            elif block.get("type") == "image" and isinstance(block.get("data"), str):
                parts.append({"type": "image", "mimeType": block.get("mimeType") or "image/png", "data": block["data"]})
        if not parts:
            continue
        if all(p["type"] == "text" for p in parts):
            out.append({"role": role, "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": role, "content": parts})
    return out


class Sampling:
    """One connection's sampling: the policy, and how many requests it has answered."""

    def __init__(self, policy: SamplingPolicy, server: str) -> None:
        self.policy = policy
        self.server = server
        self.answered = 0

    @classmethod
    def for_server(cls, policy: Optional[SamplingPolicy], server: str) -> Optional["Sampling"]:
        """A `Sampling` when `policy` lets `server` sample, else None (the capability is not offered)."""
        return cls(policy, server) if policy is not None and policy.allows(server) else None

    async def answer(self, params: dict[str, Any]) -> dict[str, Any]:
        policy = self.policy
        if self.answered >= policy.max_requests:
            raise SamplingRefused(f"this connection has used its {policy.max_requests} sampling requests")
        messages = _messages(params)
        if not messages:
            raise SamplingRefused("the request has no text or image message to answer")
        asked = params.get("maxTokens")
        max_tokens = min(policy.max_tokens, asked) if isinstance(asked, int) and asked > 0 else policy.max_tokens
        system = params.get("systemPrompt") if isinstance(params.get("systemPrompt"), str) else None
        if policy.approve is not None:
            verdict = policy.approve({"server": self.server, "messages": messages, "system": system,
                                      "max_tokens": max_tokens})
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict is not True:
                raise SamplingRefused("the host declined this sampling request")
        self.answered += 1
        reply = await policy.client.translate(messages, system=system, max_tokens=max_tokens)
        return {"role": "assistant", "content": {"type": "text", "text": reply.text or ""},
                "model": str(policy.client.model), "stopReason": "endTurn"}
