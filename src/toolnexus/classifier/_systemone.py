"""The `systemone` style's one logical call: POST `{base_url}/systemone`, with retries, bounded in time.

Headers are rebuilt for every attempt: `Content-Type`, `Authorization: Bearer <key>` from the
environment variable named by `api_key_env` (only when set and non-empty), then the caller's
`headers` with `${VAR}` expanded from the environment at call time (unset expands to `""`). The
transport runs through the client's transport adapter: an `async def post` is awaited, a plain
`post` runs on the shared bounded worker pool (never on the event loop).

A failed attempt is retried when it is a transport fault or a retryable status (408, 429, 500,
502, 503, 504, 529, plus `retryable_statuses`) and an `on_error` callback (if any) says "retry".
The wait is the server's `Retry-After` (delay-seconds) or `retry_base_ms * 2**attempt`, no jitter.

Choices beyond 0.21, each a bound a careful caller expects:
- `retries=0` means one attempt (`None` means the default two retries), as in the LLM client;
- every wait is capped (`max_retry_delay`, 30 s by default) and an optional total `deadline`
  (seconds) bounds the whole call, attempts and waits included;
- `timeout` bounds each attempt even when a transport ignores it (the attempt is abandoned);
- response bodies are read up to `MAX_RESPONSE_BYTES` by the default transport;
- credentials and expanded header values are scrubbed from every error message.

Not here: what the body holds or what the reply means (`_classifier.py`, `_wire.py`).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from ..errors import ToolnexusValueError
from ._models import ClassifierError, ClassifierResponse

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_RETRY_DELAY = 30.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_REDACTED = "«redacted»"


class UrllibClassifierTransport:
    """The default transport: one stdlib `urllib` POST per attempt (synchronous; runs on a worker thread)."""

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout: float) -> ClassifierResponse:
        import urllib.error
        import urllib.request  # loaded on the first call: importing the classifier stays cheap

        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
                if len(raw) > MAX_RESPONSE_BYTES:
                    raise ToolnexusValueError(f"response body is over {MAX_RESPONSE_BYTES} bytes")
                return ClassifierResponse(resp.status, raw, resp.headers.get("Retry-After"))
        except urllib.error.HTTPError as e:
            raw = e.read(64 * 1024)
            retry_after = e.headers.get("Retry-After") if e.headers is not None else None
            e.close()
            return ClassifierResponse(e.code, raw, retry_after)


def expand_headers(headers: Optional[dict[str, str]], secrets: list[str]) -> dict[str, str]:
    """`headers` with `${VAR}` expanded from the environment now; expanded values go to `secrets`."""
    out: dict[str, str] = {}
    for name, value in (headers or {}).items():
        text = str(value)

        def expand(m: re.Match) -> str:
            found = os.environ.get(m.group(1), "")
            if found:
                secrets.append(found)
            return found

        out[str(name)] = _VAR.sub(expand, text)
    return out


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in sorted(set(s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return text


@dataclass
class RetrySettings:
    """The retry knobs of one classifier (see the module docstring)."""

    retries: Optional[int] = 2
    retry_base_ms: int = 500
    retryable_statuses: Optional[Iterable[int]] = None
    on_error: Optional[Callable[[dict[str, Any]], Any]] = None
    max_retry_delay: Optional[float] = DEFAULT_MAX_RETRY_DELAY
    deadline: Optional[float] = None

    def attempts(self) -> int:
        retries = 2 if self.retries is None else max(0, int(self.retries))
        return retries + 1

    def retryable(self, status: int) -> bool:
        return status in RETRYABLE_STATUSES or (
            self.retryable_statuses is not None and status in self.retryable_statuses
        )

    def delay(self, attempt: int, retry_after: Optional[str]) -> float:
        from ..client._retry import _parse_retry_after

        seconds: Optional[float] = _parse_retry_after(retry_after)
        if seconds is None:
            base = self.retry_base_ms if self.retry_base_ms and self.retry_base_ms > 0 else 500
            seconds = base / 1000 * 2**attempt
        if self.max_retry_delay is not None:
            seconds = min(float(seconds), self.max_retry_delay)
        return float(seconds)


class _Deadline:
    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def left(self) -> Optional[float]:
        return None if self.at is None else self.at - time.monotonic()


async def post_with_retries(caller: Any, url: str, api_key_env: str, headers: Optional[dict[str, str]], body: bytes,
                            timeout: float, settings: RetrySettings) -> bytes:
    """POST until a 2xx body arrives (returned), retries are spent, or `on_error` says stop."""
    from ..client._errors import capped_error_body, safe_error_body

    deadline = _Deadline(settings.deadline)
    attempts = settings.attempts()
    for attempt in range(attempts):
        secrets: list[str] = []
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        sent = {"Content-Type": "application/json"}
        if key:
            sent["Authorization"] = f"Bearer {key}"
            secrets.append(key)
        sent.update(expand_headers(headers, secrets))
        left = deadline.left()
        if left is not None and left <= 0:
            raise ClassifierError(f"classifier: POST {url}: deadline of {deadline.seconds}s exceeded")
        bound = timeout if left is None else min(timeout, left)
        status, error, retry_after = 0, None, None
        try:
            response = await asyncio.wait_for(caller.post(url, sent, body, bound), timeout=bound)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            left = deadline.left()
            if left is not None and left <= 0:
                raise ClassifierError(f"classifier: POST {url}: deadline of {deadline.seconds}s exceeded") from None
            error = e
            detail = str(e) or (f"no reply within {bound}s" if isinstance(e, TimeoutError) else "")
            message = _scrub(f"classifier: POST {url}: {type(e).__name__}: {detail}", secrets)
            retryable = True
        else:
            if not isinstance(response, ClassifierResponse):
                raise ClassifierError(f"classifier: POST {url}: the transport returned {type(response).__name__}, "
                                      "not a ClassifierResponse")
            status, retry_after = int(response.status), response.retry_after
            raw = bytes(response.body or b"")
            if status < 300:
                return raw
            shown = capped_error_body(safe_error_body(status, _scrub(raw.decode("utf-8", errors="replace"), secrets)))
            message = f"classifier: POST {url}: HTTP {status}" + (
                f": {shown}" if shown and status not in (401, 403) else ""
            )
            retryable = settings.retryable(status)
        failure = ClassifierError(message)
        if attempt + 1 >= attempts:
            raise failure from None
        decision = ("retry" if retryable else "fail") if settings.on_error is None else settings.on_error(
            {"error": error, "status": status, "attempt": attempt, "retryable": retryable})
        if decision != "retry":
            raise failure from None
        wait = settings.delay(attempt, retry_after)
        left = deadline.left()
        if left is not None and wait >= left:
            raise ClassifierError(f"{message} (no time left for a retry within the deadline of "
                                  f"{deadline.seconds}s)") from None
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
