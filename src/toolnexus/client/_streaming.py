"""Reading one streamed LLM turn: bytes → SSE events → the dialect's accumulator → deltas and a Turn.

Pull-based: the next chunk is read only when the consumer has taken the previous deltas, so a slow
`on_text` applies backpressure to the socket and nothing is ever dropped. Every read is raced
against `cancel` and the call's deadline (closing the response on abort), and `cancel` is also
checked after each dispatched SSE event. One network error at/after the deadline becomes
`RunTimeout`.

A stream must end with its dialect's end marker (`[DONE]` or a `finish_reason` for OpenAI,
`message_stop` or a `stop_reason` for Anthropic). One that just stops — the server died, a proxy
cut it — raises `StreamTruncated` instead of passing the partial text off as a finished answer.
The whole stream is capped at the client's `max_response_bytes` (`ResponseTooLarge`) and every
SSE line/event at `sse.MAX_EVENT_BYTES` (`InputTooLarge`).

Errors inside the stream: an error the provider sends after the 200 (Anthropic's `event: error`,
OpenRouter's error chunk, the Responses API's `error` / `response.failed`) is raised by the
dialect as `ProviderError` naming the provider's error type and message, never passed off as a
truncation or a finished reply.

Retries (`streamed_turn`): opening the stream is retried as any call is (_retry.py). A stream that
breaks, is truncated, or carries a provider error *before any text reached the caller* is opened
again, up to `retries` more times, with the same backoff and `on_error` rule — an in-stream error
exactly as the same status on a plain reply (an exhausted quota, or a status the policy does not
retry, fails at once) — and the caller cannot tell. Once a delta was yielded the error
propagates: replaying would repeat text the caller already has. Whatever ends
the stream for good names the endpoint, as every failed call does (`Provider.locate`).

Not here: the provider's event vocabulary (wire/).
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, Optional, Union

from ..errors import StreamTruncated
from ._errors import ProviderError, ProviderResponseError, ResponseTooLarge, RunCancelled, RunTimeout
from ._provider import LlmCall, Provider
from ._result import ErrorInfo
from ._retry import Abort, _parse_retry_after, backoff_seconds, pause, provider_error_info, race
from ._sse import SseParser
from ._transport import ByteStream
from ._wire.base import Turn, WireDialect


async def read_turn(stream: ByteStream, dialect: WireDialect, abort: Abort,
                    max_bytes: Optional[int] = None) -> AsyncGenerator[Union[str, Turn], None]:
    """Yield text deltas as they arrive, then the assembled `Turn`; always closes `stream`."""
    accumulator = dialect.new_stream()
    parser = SseParser()
    seen = 0
    total = 0
    head = b""
    try:
        while not accumulator.finished:
            chunk = await race(stream.read(), abort, on_abort=stream.aclose)
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                raise ResponseTooLarge(f"toolnexus: the {dialect.name} stream exceeded max_response_bytes "
                                       f"({max_bytes} bytes); raise Client.max_response_bytes if that is expected")
            if len(head) < 200:
                head += chunk[: 200 - len(head)]
            for event in parser.feed(chunk) if chunk else parser.close():
                seen += 1
                for delta in accumulator.feed(event):
                    yield delta
                abort.check()
                if accumulator.finished:
                    break
            if not chunk:
                break
    except OSError as e:
        if abort.timed_out() and not isinstance(e, RunTimeout):
            raise RunTimeout(abort.timeout_ms) from e
        raise
    finally:
        await stream.aclose()
    if seen == 0:
        shown = head.decode("utf-8", errors="replace")
        raise ProviderResponseError(f"toolnexus: malformed {dialect.name} stream: no SSE `data:` events "
                                    f"(body began {shown!r})")
    if not accumulator.complete:
        raise StreamTruncated(f"toolnexus: the {dialect.name} stream ended after {total} bytes without "
                              f"{accumulator.end_marker}: the reply is incomplete")
    yield accumulator.turn()


async def streamed_turn(provider: Provider, url: str, headers: dict[str, str], body: dict[str, Any],
                        dialect: WireDialect, abort: Abort, call: LlmCall) -> AsyncGenerator[Union[str, Turn], None]:
    """Open the stream (with retries) and read one turn, re-opening a stream that failed before
    any delta was yielded (see module docstring). `call.attempts` counts every opening."""
    abort = provider.call_abort(abort)
    policy = provider.settings.retry
    max_bytes = provider.settings.limits.max_response_bytes
    reopened = 0
    while True:
        stream = await provider.open(url, headers, body, abort, call=call)  # counts each opening on `call`
        yielded = False
        try:
            async for item in read_turn(stream, dialect, abort, max_bytes):
                yielded = yielded or not isinstance(item, Turn)
                yield item
            return
        except (RunTimeout, RunCancelled):
            raise
        except ProviderResponseError as e:
            provider.locate(e, url, headers, body)
            raise
        except (OSError, ProviderError) as e:
            if yielded:
                provider.locate(e, url, headers, body)
                raise
            wait: Optional[int] = None
            if isinstance(e, ProviderError):
                info: ErrorInfo = provider_error_info(e, reopened, policy.retryable_statuses)
                wait = _parse_retry_after(e.retry_after)
            else:
                info = {"error": e, "attempt": reopened, "retryable": True}
            default = "retry" if info["retryable"] else "fail"
            tier = policy.on_error(info) if policy.on_error is not None else default
            if tier == "fail" or reopened >= policy.retries:
                provider.locate(e, url, headers, body)
                raise
            await pause(wait if wait is not None else backoff_seconds(reopened, policy.retry_base_ms), abort)
            reopened += 1
