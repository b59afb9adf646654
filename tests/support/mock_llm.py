"""The fixtures' scripted model (`mockLLM`, agents.md §15) as an `HttpTransport`, plus a fixture loader.

`MockLLM(spec)` plugs in at the §8 transport seam, the one allowed fake: `post()` picks the script
named by `payload["model"]` and answers with the first rule whose matcher fits the request's
messages. It is stateless per request (the transcript decides), thread-safe, and records every
payload it saw (`requests`) so tests can assert on the wire transcript.

Supported rule keys:

- matchers: `always`, `whenToolMsgs` (`0`, `">=N"` or an exact int), `whenToolMsgContains`,
  `whenNoToolMsgContains` (all present matchers must hold; a rule with none matches);
- replies: `toolCalls: [{name, args}]` or `text` (a template, below);
- `blocksUntil: "released-or-aborted"`: the worker thread waits on `release()` (it sets `blocked`
  first so a test can await the request being in flight);
- per-model rendezvous (`rendezvous={"m-explore": 2}`): calls meet on a `threading.Barrier` (with a
  timeout) so concurrency assertions are deterministic.

Text placeholders (every one used by any fixture): `<first tool msg content>`, `<last tool msg
content>`, `<join all tool msg contents with ' + '>`, `<count of numbered inbox items in last user
msg>`, `<comma-join of the bootstrapOrder files whose '## <file>' header appears in the system
prompt>` (joined with ","), and the persona conditionals `<if system prompt contains 'X' [AND last
user message contains 'Y'] then 'A' else 'B'>`. An unknown placeholder raises, naming it.

Replies are OpenAI-shaped, or Anthropic-shaped when the spec's `style` is `"anthropic"`.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from pathlib import Path
from typing import Any, Optional

__all__ = ["MockLLM", "load_fixture", "FIXTURES", "DEFAULT_BOOTSTRAP_ORDER"]

from .shared import FIXTURES

DEFAULT_BOOTSTRAP_ORDER = ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "HEARTBEAT.md", "MEMORY.md"]

_NUMBERED = re.compile(r"^\d+\. ", re.MULTILINE)
_CONDITION = re.compile(r"(system prompt|last user message) contains '(.*?)'")
_IF = re.compile(r"^if (?P<conds>.*) then '(?P<then>.*)' else '(?P<else>.*)'$", re.DOTALL)


# --------------------------------------------------------------------------- fixture loading


def _pointer(doc: Any, pointer: str) -> Any:
    node = doc
    for raw in pointer.lstrip("/").split("/") if pointer.strip("/") else []:
        key = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def _resolve(node: Any, base: Path) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and "#" in ref:
            file_part, pointer = ref.split("#", 1)
            target = (base / file_part).resolve() if file_part else None
            doc = json.loads(target.read_text(encoding="utf-8")) if target else None
            return _resolve(_pointer(doc, pointer), target.parent if target else base)
        return {k: _resolve(v, base) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, base) for v in node]
    return node


def load_fixture(name: str) -> dict[str, Any]:
    """`<shared>/fixtures/<name>/fixture.json` with every `"$ref"` resolved from its folder."""
    path = FIXTURES / name / "fixture.json"
    return _resolve(json.loads(path.read_text(encoding="utf-8")), path.parent)


# --------------------------------------------------------------------------- transcript reading


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content")))
            elif isinstance(block, str):
                parts.append(block)
        return "".join(parts)
    return ""


def _tool_contents(messages: list[dict[str, Any]]) -> list[str]:
    """Tool results in order: OpenAI `role=="tool"` messages or Anthropic `tool_result` blocks."""
    out: list[str] = []
    for m in messages:
        if m.get("role") == "tool":
            out.append(_text_of(m.get("content")))
        elif m.get("role") == "user" and isinstance(m.get("content"), list):
            out.extend(
                _text_of(b.get("content"))
                for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"
            )
    return out


def _is_tool_result_turn(m: dict[str, Any]) -> bool:
    content = m.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def _last_user(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user" and not _is_tool_result_turn(m):
            return _text_of(m.get("content"))
    return ""


def _system(payload: dict[str, Any]) -> str:
    if isinstance(payload.get("system"), (str, list)):
        return _text_of(payload["system"])
    return "\n\n".join(_text_of(m.get("content")) for m in payload.get("messages") or [] if m.get("role") == "system")


# --------------------------------------------------------------------------- the transport


class MockLLM:
    """A fixture `mockLLM` spec behind `post(url, headers, payload, timeout)`."""

    def __init__(
        self,
        spec: dict[str, Any],
        *,
        rendezvous: Optional[dict[str, int]] = None,
        rendezvous_timeout: float = 5.0,
        block_timeout: float = 30.0,
        bootstrap_order: Optional[list[str]] = None,
    ) -> None:
        self.style = spec.get("style", "openai")
        self.usage = dict(spec.get("usagePerCall") or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
        self.scripts: dict[str, list[dict[str, Any]]] = spec["scripts"]
        self.bootstrap_order = list(bootstrap_order or DEFAULT_BOOTSTRAP_ORDER)
        self.requests: list[dict[str, Any]] = []
        self.released = threading.Event()
        self.blocked = threading.Event()
        self._block_timeout = block_timeout
        self._rendezvous_timeout = rendezvous_timeout
        self._barriers = {model: threading.Barrier(n) for model, n in (rendezvous or {}).items()}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    # -- HttpTransport

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._lock:
            self.requests.append(copy.deepcopy(payload))
        model = payload.get("model")
        script = self.scripts.get(model)  # type: ignore[arg-type]
        if script is None:
            raise LookupError(f"mockLLM: no script for model {model!r} (scripts: {sorted(self.scripts)})")
        barrier = self._barriers.get(model)  # type: ignore[arg-type]
        if barrier is not None:
            try:
                barrier.wait(self._rendezvous_timeout)
            except threading.BrokenBarrierError:
                pass
        messages = payload.get("messages") or []
        rule = next((r for r in script if self._matches(r, messages)), None)
        if rule is None:
            raise LookupError(f"mockLLM: no rule of script {model!r} matches a transcript of {len(messages)} messages")
        reply = self._reply(rule, payload)
        if rule.get("blocksUntil"):
            self.blocked.set()
            self.released.wait(self._block_timeout)
        return reply

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        raise NotImplementedError("mockLLM does not stream")

    def release(self) -> None:
        """Let every blocked (and future blocking) call return."""
        self.released.set()

    def calls_for(self, model: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for p in self.requests if p.get("model") == model]

    # -- rules

    @staticmethod
    def _matches(rule: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
        tools = _tool_contents(messages)
        if "whenToolMsgs" in rule:
            want = rule["whenToolMsgs"]
            if isinstance(want, str) and want.startswith(">="):
                if len(tools) < int(want[2:]):
                    return False
            elif len(tools) != int(want):
                return False
        if "whenToolMsgContains" in rule and not any(rule["whenToolMsgContains"] in t for t in tools):
            return False
        if "whenNoToolMsgContains" in rule and any(rule["whenNoToolMsgContains"] in t for t in tools):
            return False
        if "always" in rule and not rule["always"]:
            return False
        return True

    def _reply(self, rule: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
        usage = dict(self.usage)
        if "toolCalls" in rule:
            calls = [(f"call_{next(self._ids)}", c["name"], c.get("args") or {}) for c in rule["toolCalls"]]
            if self.style == "anthropic":
                blocks = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
                return {"content": blocks, "stop_reason": "tool_use", "usage": self._anthropic_usage(usage)}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, n, a in calls
                ],
            }
            return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], "usage": usage}
        text = self.render(rule.get("text", ""), payload)
        if self.style == "anthropic":
            return {
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": self._anthropic_usage(usage),
            }
        return {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage,
        }

    @staticmethod
    def _anthropic_usage(usage: dict[str, Any]) -> dict[str, Any]:
        return {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)}

    # -- templates

    def render(self, template: str, payload: dict[str, Any]) -> str:
        """Fill every `<…>` placeholder (nesting-aware) from the request."""
        out: list[str] = []
        i = 0
        while i < len(template):
            if template[i] != "<":
                out.append(template[i])
                i += 1
                continue
            depth, j = 0, i
            while j < len(template):
                if template[j] == "<":
                    depth += 1
                elif template[j] == ">":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(template):
                raise ValueError(f"mockLLM: unclosed placeholder in template {template!r}")
            out.append(self._placeholder(template[i + 1 : j], payload))
            i = j + 1
        return "".join(out)

    def _placeholder(self, name: str, payload: dict[str, Any]) -> str:
        messages = payload.get("messages") or []
        tools = _tool_contents(messages)
        if name == "first tool msg content":
            return tools[0] if tools else ""
        if name == "last tool msg content":
            return tools[-1] if tools else ""
        if name == "join all tool msg contents with ' + '":
            return " + ".join(tools)
        if name == "count of numbered inbox items in last user msg":
            return str(len(_NUMBERED.findall(_last_user(messages))))
        if name.startswith("comma-join of the bootstrapOrder files"):
            system = _system(payload)
            return ",".join(f for f in self.bootstrap_order if f"## {f}" in system)
        conditional = _IF.match(name)
        if conditional:
            system, last_user = _system(payload), _last_user(messages)
            conds = _CONDITION.findall(conditional["conds"])
            if not conds:
                raise ValueError(f"mockLLM: cannot read the condition of placeholder <{name}>")
            hold = all((needle in (system if where == "system prompt" else last_user)) for where, needle in conds)
            return conditional["then"] if hold else conditional["else"]
        raise ValueError(f"mockLLM: unknown template placeholder <{name}>")
