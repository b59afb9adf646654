"""Retries, Retry-After, on_error, provider errors, deadline and cancel — against a real server."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from support.llm_server import Hang, Json, LlmServer, Trickle, openai_calls, openai_text
from toolnexus.client import (
    ProviderError,
    RunCancelled,
    RunTimeout,
    UrllibTransport,
    _HttpError,
    capped_error_body,
    create_client,
    redact_identifiers,
    safe_error_body,
)
from toolnexus.client._retry import _is_retryable_status, _parse_retry_after
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def llm(server, **kw):
    kw.setdefault("api_key", "k")
    kw.setdefault("retry_base_ms", 1)
    return create_client(base_url=server.base_url, style="openai", model="m", **kw)


# -- pure helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value,expected", [("0", 0), (" 3 ", 3), ("2147483647", 2147483647), ("2147483648", None),
                                            ("1.5", None), ("-1", None), ("", None), (None, None), ("٣", None),
                                            ("Wed, 21 Oct 2015 07:28:00 GMT", None)])
def test_parse_retry_after_accepts_delay_seconds_only(value, expected):
    assert _parse_retry_after(value) == expected


def test_retryable_statuses_are_pinned_and_extra_is_additive():
    assert [s for s in range(400, 600) if _is_retryable_status(s)] == [429, 500, 502, 503, 504, 529]
    assert _is_retryable_status(408, frozenset({408})) and _is_retryable_status(429, frozenset({408}))


def test_provider_error_messages_are_pinned():
    assert str(ProviderError(500, "  boom  ")) == "LLM 500: boom"
    assert str(ProviderError(503, "")) == "LLM 503"
    long = "x" * 250
    assert str(ProviderError(400, long)) == "LLM 400: " + "x" * 200 + "…"
    denied = ProviderError(401, '{"error": "bad key sk-123"}', "5")
    assert (str(denied), denied.body, denied.text, denied.retry_after, denied.status) == ("LLM 401", "", "", "5", 401)
    assert str(ProviderError(403, "secret")) == "LLM 403"
    redacted = ProviderError(429, '{"user_id": "u-42", "org_id":17, "organization" : "acme", "x": "keep"}')
    assert (
        redacted.body == '{"user_id": "«redacted»", "org_id":"«redacted»", "organization" : "«redacted»", "x": "keep"}'
    )
    assert _HttpError is ProviderError
    assert safe_error_body(500, ' {"account_id": "a"} ') == '{"account_id": "«redacted»"}'
    assert capped_error_body("abc", 2) == "ab…" and redact_identifiers("no ids") == "no ids"


def test_run_timeout_and_cancel_messages_are_pinned():
    assert str(RunTimeout(250)) == "run timeout after 250ms (client timeout_ms budget)"
    assert isinstance(RunTimeout(1), TimeoutError)
    assert str(RunCancelled()) == "run cancelled"


# -- retries ------------------------------------------------------------------------------------


async def test_429_with_retry_after_zero_is_retried_and_counted_as_attempts(server):
    server.add(Json({"error": "slow down"}, status=429, headers={"Retry-After": "0"}), Json(openai_text("ok")))
    infos, events = [], []

    def on_error(info):
        infos.append(dict(info))
        return "retry"

    async with llm(server, on_error=on_error, on_metric=events.append) as c:
        r = await c.run("x")
    assert r.text == "ok"
    assert infos == [{"status": 429, "attempt": 0, "retryable": True}]
    assert events[0]["attempts"] == 2 and events[0]["status"] == "ok"
    assert server.connections == 1  # the retry reused the pooled connection


async def test_a_call_that_fails_after_retries_reports_every_attempt_in_its_metric(server):
    server.add(*[Json({"error": "down"}, status=503) for _ in range(3)])
    events = []
    async with llm(server, retries=2, on_metric=events.append) as c:
        with pytest.raises(ProviderError):
            await c.run("x")
    llm_events = [e for e in events if e["event"] == "llm"]
    assert [(e["status"], e["attempts"]) for e in llm_events] == [("error", 3)]
    assert len(server.requests) == 3


async def test_a_streamed_call_whose_openings_all_fail_reports_them(server):
    server.add(*[Json({"error": "down"}, status=503) for _ in range(2)])
    events = []
    async with llm(server, retries=1, on_metric=events.append) as c:
        with pytest.raises(ProviderError):
            async for _ in c.stream("x"):
                pass
    assert [(e["status"], e["attempts"]) for e in events if e["event"] == "llm"] == [("error", 2)]


async def test_retry_after_seconds_are_honoured(server):
    server.add(Json({}, status=503, headers={"retry-after": "1"}), Json(openai_text("ok")))
    async with llm(server) as c:
        started = time.monotonic()
        await c.run("x")
    assert time.monotonic() - started >= 1.0


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_5xx_without_retry_after_backs_off_and_retries(server, status):
    server.add(Json({"error": "down"}, status=status), Json(openai_text("ok")))
    async with llm(server) as c:
        assert (await c.run("x")).text == "ok"
    assert len(server.requests) == 2


async def test_exhausted_retries_raise_last_error_and_call_on_error_every_attempt(server):
    server.add(*[Json({"error": f"down {i}"}, status=503) for i in range(3)])
    infos = []
    async with llm(server, retries=2, on_error=lambda info: infos.append(info["attempt"]) or "retry") as c:
        with pytest.raises(ProviderError) as e:
            await c.run("x")
    assert str(e.value) == f'LLM 503: {{"error": "down 2"}} (POST {server.base_url}/chat/completions)'
    assert infos == [0, 1, 2] and len(server.requests) == 3


async def test_non_retryable_status_fails_at_once_after_on_error(server):
    server.add(Json({"error": "bad request"}, status=400))
    infos = []
    async with llm(server, on_error=lambda info: infos.append(dict(info)) or "fail") as c:
        with pytest.raises(ProviderError, match="LLM 400"):
            await c.run("x")
    assert infos == [{"status": 400, "attempt": 0, "retryable": False}]


async def test_on_error_can_retry_a_non_retryable_status_and_fail_a_retryable_one(server):
    server.add(Json({}, status=400), Json(openai_text("ok")), Json({}, status=429))
    async with llm(server, on_error=lambda info: "retry" if info["status"] == 400 else "fail") as c:
        assert (await c.run("x")).text == "ok"
        with pytest.raises(ProviderError, match="LLM 429"):
            await c.run("y")
    assert len(server.requests) == 3


async def test_retryable_statuses_are_additive(server):
    server.add(Json({}, status=408), Json(openai_text("ok")))
    async with llm(server, retryable_statuses=[408]) as c:
        assert (await c.run("x")).text == "ok"


async def test_max_retry_after_ms_refuses_long_waits(server):
    server.add(Json({}, status=429, headers={"Retry-After": "3600"}))
    async with llm(server, max_retry_after_ms=1000) as c:
        started = time.monotonic()
        with pytest.raises(ProviderError, match="LLM 429"):
            await c.run("x")
    assert time.monotonic() - started < 5  # refused at once, not after 3600 s


async def test_network_errors_are_retried_then_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before use: connection refused
    infos = []
    async with create_client(base_url=f"http://127.0.0.1:{port}", style="openai", model="m", api_key="k",
                             retry_base_ms=1, on_error=lambda i: infos.append(i) or "retry") as c:
        with pytest.raises(OSError):
            await c.run("x")
    assert [i["attempt"] for i in infos] == [0, 1, 2] and all(i["retryable"] for i in infos)
    assert isinstance(infos[0]["error"], OSError)


async def test_error_body_read_is_capped_at_64_kib(server):
    server.add(Json(b"e" * 1_000_000, status=400))
    async with llm(server) as c:
        with pytest.raises(ProviderError) as e:
            await c.run("x")
    assert len(e.value.body) == 64 * 1024


# -- deadline and cancel -------------------------------------------------------------------------


async def test_deadline_aborts_a_hanging_server(server):
    server.add(Hang())
    events = []
    async with llm(server, timeout_ms=300, on_metric=events.append) as c:
        started = time.monotonic()
        with pytest.raises(RunTimeout) as e:
            await c.run("x")
        elapsed = time.monotonic() - started
    assert str(e.value) == "run timeout after 300ms (client timeout_ms budget)"
    assert 0.29 <= elapsed < 5  # not early; and aborted, where the server would hang forever
    assert await asyncio.to_thread(server.disconnected.wait, 2)
    assert events[-1]["error"] == "run timeout after 300ms (client timeout_ms budget)"


async def test_deadline_bounds_a_trickling_server_not_just_each_read(server):
    server.add(Trickle(interval=0.02))
    async with llm(server, timeout_ms=300) as c:
        started = time.monotonic()
        with pytest.raises(RunTimeout):
            await c.run("x")
    assert time.monotonic() - started < 5  # the trickle alone would last for hours


async def test_cancel_aborts_mid_request_and_closes_the_socket(server):
    server.add(Hang())
    cancel = asyncio.Event()

    async def cancel_on_arrival():
        await asyncio.to_thread(server.arrived.wait, 5)
        cancel.set()
        return time.monotonic()

    async with llm(server) as c:
        setter = asyncio.create_task(cancel_on_arrival())
        with pytest.raises(RunCancelled):
            await c.run("x", cancel=cancel)
        raised_at = time.monotonic()
        set_at = await setter
    assert raised_at - set_at < 2  # aborted mid-request (latency goal: benchmarks/cancel_latency.py)
    assert await asyncio.to_thread(server.disconnected.wait, 1)
    assert server.disconnected_at - set_at < 2  # the socket itself is closed, not left for the 120 s timeout


async def test_cancel_during_backoff_stops_waiting(server):
    server.add(Json({}, status=503, headers={"Retry-After": "30"}))
    cancel = asyncio.Event()
    async with llm(server, on_error=lambda i: (cancel.set(), "retry")[1]) as c:
        started = time.monotonic()
        with pytest.raises(RunCancelled):
            await c.run("x", cancel=cancel)
    assert time.monotonic() - started < 5 and len(server.requests) == 1  # not the 30 s Retry-After


async def test_already_set_cancel_sends_nothing(server):
    cancel = asyncio.Event()
    cancel.set()
    async with llm(server) as c:
        with pytest.raises(RunCancelled):
            await c.run("x", cancel=cancel)
    assert server.requests == []


async def test_deadline_abandons_a_sync_transport_that_ignores_timeout():
    release = threading.Event()

    class Stuck:
        def post(self, url, headers, payload, timeout):
            release.wait(10)
            return openai_text("late")

        def open(self, *a):
            raise NotImplementedError

    c = create_client(base_url="http://x", style="openai", model="m", api_key="k", http_transport=Stuck(),
                      timeout_ms=200)
    started = time.monotonic()
    with pytest.raises(RunTimeout):
        await c.run("x")
    release.set()
    assert time.monotonic() - started < 5  # the stuck transport alone would take 10 s


async def test_tools_are_not_bounded_by_deadline_unless_race_tools():
    finished = asyncio.Event()
    release = asyncio.Event()

    async def slow(args=None, ctx=None):
        await release.wait()
        finished.set()
        return ToolResult("slow", False)

    tk = Toolkit(None, None, [], [], [Tool("slow", "", {"type": "object"}, "native", slow)])

    class Model:
        async def post(self, url, headers, payload, timeout):
            return openai_calls(("c", "slow", {})) if len(payload["messages"]) == 1 else openai_text("done")

    raced = create_client(base_url="http://x", style="openai", model="m", api_key="k", http_transport=Model(),
                          timeout_ms=150, race_tools=True)
    started = time.monotonic()
    with pytest.raises(RunTimeout):
        await raced.run("x", tk)
    assert time.monotonic() - started < 5 and not finished.is_set()  # the tool alone never finishes

    patient = create_client(base_url="http://x", style="openai", model="m", api_key="k", http_transport=Model(),
                            timeout_ms=150)
    task = asyncio.create_task(patient.run("x", tk))
    await asyncio.wait([task], timeout=0.3)
    assert not task.done()  # deadline passed, tool still running: not interrupted
    release.set()
    with pytest.raises(RunTimeout):  # the next LLM call is past the deadline
        await task
    assert finished.is_set()


async def test_race_tools_bounds_wait_for_by_cancel():
    cancel = asyncio.Event()

    async def suspend(args=None, ctx=None):
        from toolnexus.types import pending

        return pending(kind="input", prompt="?")

    async def wait_for(request):
        cancel.set()
        await asyncio.Event().wait()

    tk = Toolkit(None, None, [], [], [Tool("q", "", {"type": "object"}, "native", suspend)])

    class Model:
        async def post(self, url, headers, payload, timeout):
            return openai_calls(("c", "q", {}))

    c = create_client(base_url="http://x", style="openai", model="m", api_key="k", http_transport=Model(),
                      wait_for=wait_for, race_tools=True)
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(c.run("x", tk, cancel=cancel), 2)


# -- transports -----------------------------------------------------------------------------------


async def test_default_transport_reuses_one_connection_across_turns_and_runs(server):
    server.add(Json(openai_calls(("c", "t", {}))), Json(openai_text("one")), Json(openai_text("two")))

    async def t(args=None, ctx=None):
        return ToolResult("x", False)

    tk = Toolkit(None, None, [], [], [Tool("t", "", {"type": "object"}, "native", t)])
    async with llm(server) as c:
        await c.run("a", tk)
        await c.run("b")
    assert server.connections == 1 and {r.connection for r in server.requests} == {1}


async def test_sync_transport_runs_on_the_bounded_pool_not_the_default_executor(server):
    names = []

    class Sync:
        def post(self, url, headers, payload, timeout):
            names.append(threading.current_thread().name)
            return openai_text("ok")

    class Async:
        async def post(self, url, headers, payload, timeout):
            names.append(threading.current_thread().name)
            return openai_text("ok")

    for transport in (Sync(), Async()):
        await create_client(base_url="http://x", style="openai", model="m", api_key="k",
                            http_transport=transport).run("x")
    assert names[0].startswith("toolnexus-transport") and names[1] == threading.current_thread().name


async def test_urllib_transport_round_trip_and_errors(server):
    server.add(Json(openai_text("via urllib")), Json({"error": "x"}, status=429, headers={"Retry-After": "7"}))
    c = create_client(base_url=server.base_url, style="openai", model="m", api_key="k", retries=0,
                      http_transport=UrllibTransport())
    assert (await c.run("x")).text == "via urllib"
    with pytest.raises(ProviderError) as e:
        await c.run("y")
    assert (e.value.status, e.value.retry_after) == (429, "7")
    assert server.requests[0].headers["authorization"] == "Bearer k"


async def test_unexpected_transport_exception_is_final_and_skips_on_error():
    calls = []

    class Broken:
        def post(self, url, headers, payload, timeout):
            calls.append(1)
            raise KeyError("no script")

    infos = []
    c = create_client(base_url="http://x", style="openai", model="m", api_key="k", http_transport=Broken(),
                      on_error=lambda i: infos.append(i) or "retry")
    with pytest.raises(KeyError):
        await c.run("x")
    assert calls == [1] and infos == []
