"""Reading one streamed LLM turn: bytes → SSE events → the dialect's accumulator → deltas and a Turn.

Pull-based: the next chunk is read only when the consumer has taken the previous deltas, so a slow
`on_text` applies backpressure to the socket and nothing is ever dropped. Every read is raced
against `cancel` and the run deadline (closing the response on abort), and `cancel` is also checked
after each dispatched SSE event. Network errors mid-stream are not retried (retries cover opening
only); one at/after the deadline becomes `RunTimeout`.

Not here: opening the stream (client + retry) or the provider's event vocabulary (wire/).
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, Union

from .errors import ProviderResponseError, RunTimeout
from .retry import Abort, race
from .sse import SseParser
from .transport import ByteStream
from .wire.base import Turn

__all__ = ["read_turn"]


async def read_turn(stream: ByteStream, dialect: Any, abort: Abort) -> AsyncGenerator[Union[str, Turn], None]:
    """Yield text deltas as they arrive, then the assembled `Turn`; always closes `stream`."""
    accumulator = dialect.new_stream()
    parser = SseParser()
    seen = 0
    head = b""
    try:
        while not accumulator.finished:
            chunk = await race(stream.read(), abort, on_abort=stream.aclose)
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
    yield accumulator.turn()
