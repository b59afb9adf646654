"""Replaying recorded-shape provider replies byte for byte over the loopback `LlmServer`.

A fixture (`tests/fixtures/providers/<provider>/<name>`) is one reply body as the provider sends
it, headed by `#:` provenance lines (where its shape comes from) and optional `#! status N` /
`#! header Name: value` lines (README.md there). `step(name)` turns it into a server step: a
`.sse` body as a chunked event stream cut at awkward byte boundaries (`awkward_chunks`: inside a
UTF-8 character, between a CR and its LF, inside `data:`, between the two line ends of an event),
a `.json` body with its status and headers. The client under test talks to it through its
DEFAULT transport; each HTTP chunk reaches the SSE parser as one read, so the cuts are exercised
deterministically, whatever TCP does.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from support.llm_server import Json, Sse

__all__ = ["FIXTURES", "Fixture", "load", "step", "awkward_chunks", "client_for"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "providers"


@dataclass
class Fixture:
    name: str
    source: list[str]
    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def load(name: str) -> Fixture:
    """The fixture `name` (`"anthropic/refusal.json"`); it must say where its shape comes from."""
    raw = (FIXTURES / name).read_bytes()
    source: list[str] = []
    status, headers = 200, {}
    while raw.startswith(b"#"):
        line, _, raw = raw.partition(b"\n")
        text = line.decode("utf-8")
        if text.startswith("#: "):
            source.append(text[3:])
        elif text.startswith("#! status "):
            status = int(text.split()[-1])
        elif text.startswith("#! header "):
            key, _, value = text[len("#! header "):].partition(":")
            headers[key.strip()] = value.strip()
        else:
            raise ValueError(f"{name}: unknown fixture directive {text!r}")
    if not source:
        raise ValueError(f"{name}: a fixture must say where its shape comes from (#: ...)")
    return Fixture(name, source, raw, status, headers)


def awkward_chunks(body: bytes) -> list[bytes]:
    """`body` cut inside UTF-8 characters, between CR and LF, inside `data:` and between an
    event's two line ends (every cut at least once), never into an empty chunk."""
    cuts: set[int] = set()
    for i, byte in enumerate(body):
        if byte >= 0xC0:  # the lead byte of a multi-byte UTF-8 character: cut right after it
            cuts.add(i + 1)
    cuts.update(m.start() + 1 for m in re.finditer(rb"\r\n", body))
    cuts.update(m.start() + 2 for m in re.finditer(rb"data:", body))
    cuts.update(m.start() + 1 for m in re.finditer(rb"\n\n", body))
    points = [0, *sorted(c for c in cuts if 0 < c < len(body)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def step(name: str, *, split: bool = True) -> Union[Json, Sse]:
    """The server step replaying fixture `name`."""
    fx = load(name)
    if name.endswith(".sse"):
        return Sse(awkward_chunks(fx.body) if split else [fx.body], status=fx.status)
    return Json(fx.body, status=fx.status, headers=fx.headers)


def client_for(server: Any, style: str, **options: Any) -> Any:
    """A client on the default transport pointed at `server` (no backoff to wait through)."""
    from toolnexus import create_client

    options.setdefault("retry_base_ms", 1)
    base = options.pop("base_url", server.base_url + "/v1")
    return create_client(base_url=base, style=style, model=options.pop("model", "replay-model"), api_key="sk-test-key",
                         **options)
