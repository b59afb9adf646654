"""Errors the LLM client raises, and the helpers that make provider error bodies safe to show.

A provider's error body can carry account identifiers and, for 401/403, hints about credentials,
so `ProviderError` never keeps those verbatim: identifiers are redacted, auth failures keep no
body at all, and the message shows at most `MAX_ERROR_BODY` characters. Transports read at most
`MAX_ERROR_READ_BYTES` of an error body (a misbehaving server cannot make us buffer megabytes).

Credentials are scrubbed too: an upstream that echoes the request back (some gateways put the
request headers in their error body) must not hand the API key to whoever reads the error — a
log, a trace, or a model that sees a sub-agent's failure as a tool result. `ProviderError.scrub`
replaces every given secret (the client passes its API key and the values of its credential
headers), and `redact_secrets` also masks `Bearer …` tokens and `sk-…`-style keys it was not told
about.

Where and what to check: once the retries are spent, the client (`Provider.locate`, one
place above every transport) tells the error where it was going — `ProviderError.locate` adds
`(POST <endpoint>)` and, for 401/403/404, a hint saying what to check; a network error of ours
(`NetworkError`, `NetworkTimeout`) gets the same suffix. The endpoint is `endpoint_of(url)`:
scheme, host, port and path, never a userinfo part, with credential-looking query values and
every known secret masked. The key itself never appears in a hint — only where it came from.
The bare constructor keeps the pinned `LLM <status>[: <body>]` text, which stays the message's
beginning either way.

What the provider called the error: `ProviderError.error_type` / `.error_message` are read from the
body (OpenAI `{"error": {"type", "code", "message"}}`, Anthropic `{"type": "error", "error":
{"type", "message"}}`, OpenRouter / Gemini `{"error": {"code", "message", "status"}}`). An error
the provider sent inside a 2xx reply (a stream's error event) is built with them given and
`in_stream=True`, and its message names them: `LLM 529: overloaded_error: Overloaded (inside the
anthropic stream)`. `quota` says the error is an exhausted quota or billing limit, which no retry
cures (`insufficient_quota`, `billing_error`, or a 429 without `Retry-After` whose message says
quota, credit, billing or usage limit and carries no retry delay); such an error's `hint` says what
to do.

This module holds exception types and pure string helpers only; nothing here does I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from .._redact import is_credential_header, scrub
from ..content._errors import ContentPartError as ContentPartError  # the content-part model's error, re-exported here
from ..errors import InputTooLarge, ToolnexusError

REDACTED = "«redacted»"
PLACEHOLDER_KEYS = ("unused",)
"""Keys that mean "none was configured": the agent runtime sends `unused` when it found no key."""
MAX_ERROR_BODY = 200
MAX_ERROR_READ_BYTES = 64 * 1024

_IDENTIFIER_KEYS = ("user_id", "account_id", "org_id", "organization")
_JSON_SCALAR = r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null'
_IDENTIFIER_VALUE = re.compile(r'("(?:' + "|".join(_IDENTIFIER_KEYS) + r')"\s*:\s*)(' + _JSON_SCALAR + r")")


def redact_identifiers(text: str) -> str:
    """Replace the scalar values of JSON keys `user_id`/`account_id`/`org_id`/`organization`.

    Works on raw text (the body may not be valid JSON); the replacement is the JSON string
    `"«redacted»"`, so a JSON body stays JSON.
    """
    return _IDENTIFIER_VALUE.sub(lambda m: m.group(1) + '"' + REDACTED + '"', text)


_BEARER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk|xox[abp]|ghp|gho|github_pat|AKIA)[-_][A-Za-z0-9_-]{12,}")


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every given secret (4+ characters) and anything shaped like a bearer token or
    an `sk-…` API key replaced by `«redacted»`."""
    text = scrub(text, secrets)
    text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    return _KEY_LIKE.sub(REDACTED, text)


def safe_error_body(status: int, text: str) -> str:
    """The body we keep for an HTTP error: `""` for 401/403, else redacted and stripped."""
    if status in (401, 403):
        return ""
    return redact_identifiers(text or "").strip()


def capped_error_body(body: str, limit: int = MAX_ERROR_BODY) -> str:
    """`body` cut to `limit` characters, with `…` appended when it was longer."""
    return body if len(body) <= limit else body[:limit] + "…"


def endpoint_of(url: str, secrets: Iterable[str] = ()) -> str:
    """`url` as safe to show: `scheme://host[:port]/path`, plus the query with each
    credential-looking value (`key=`, `token=`, `sig=`...) masked; a userinfo part is dropped and
    every given secret is masked wherever it appears."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return scrub(url.split("?", 1)[0].rsplit("@", 1)[-1], secrets)
    if ":" in host:
        host = f"[{host}]"
    shown = f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{parts.path}"
    if parts.query:
        pieces = [f"{piece.partition('=')[0]}={REDACTED}"
                  if is_credential_header(unquote_plus(piece.partition("=")[0])) else piece
                  for piece in parts.query.split("&")]
        shown += "?" + "&".join(pieces)
    return scrub(shown, secrets)


def provider_hint(status: int, *, key_source: str, model: str, path_suffix: str = "",
                  unset_key: str | None = None) -> str | None:
    """What to check after a 401, 403 or 404 (None for other statuses).

    `key_source` names where the key came from, as a noun phrase (`the API key from
    OPENAI_API_KEY`, `the API key passed as api_key`) — never the key; `unset_key`, when no key
    was configured at all, is the variable to export instead. `path_suffix` is what the client
    appended to `base_url` (`/chat/completions`).
    """
    if status in (401, 403) and unset_key:
        others = " / ".join(v for v in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY") if v != unset_key)
        return (f"no API key was set, so a placeholder was sent: export {unset_key} (or {others}), or pass one "
                '(api_key=, or llm["api_key"] for an agent)')
    if status == 401:
        return f"check {key_source}: the endpoint did not accept it"
    if status == 403:
        return (f"the endpoint refused this request with {key_source}: check the key's permissions and "
                f'its access to model "{model}"')
    if status == 404:
        where = f' (requests go to base_url + "{path_suffix}")' if path_suffix else ""
        return f'check base_url{where} and the model name "{model}"'
    return None


_QUOTA_TYPES = frozenset({"insufficient_quota", "billing_error", "billing_hard_limit_reached",
                          "insufficient_credits", "credit_balance_too_low"})
_QUOTA_WORDS = re.compile(r"(?i)\b(quota|billing|credit|spend(ing)? limit|usage limits?)\b")
QUOTA_HINT = ("the provider says the account is out of quota or credit, so retrying will not help: add credit or "
              "raise the spending limit in the provider's billing settings (or use another key), then run again")


def _error_fields(body: str) -> tuple[str | None, str | None]:
    """`(type or code, message)` of a provider's JSON error body, when it has them."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    if isinstance(data, list) and data:  # Gemini wraps its error in a list
        data = data[0]
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return None, None
    kind = next((v for v in (err.get("type"), err.get("code"), err.get("status"))
                 if isinstance(v, str) and v and v != "error"), None)
    message = err.get("message")
    return kind, message if isinstance(message, str) else None


class ProviderError(ToolnexusError):
    """A non-2xx reply from the LLM endpoint, or an error the provider sent inside a 2xx reply.

    `.status` is the HTTP status, `.body` the safe body (see `safe_error_body`), `.text` the same
    (deprecated name), `.retry_after` the raw `Retry-After` header or None. Raised by the client,
    it also carries `.endpoint` (the URL it was sent to, made safe by `endpoint_of`) and, for
    401/403/404 and exhausted quotas, `.hint` (what to check); both are None on an error built by
    hand. `.error_type` / `.error_message` are the provider's own words for the error (read from
    the body unless given), `.inside` says it came inside a 2xx reply (`"stream"` or `"reply"`;
    then `.status` is the status its type stands for, and `.in_stream` is True for a stream), and
    `.quota` that it is an exhausted quota or billing limit.
    """

    def __init__(self, status: int, text: str = "", retry_after: str | None = None, *,
                 error_type: str | None = None, error_message: str | None = None, inside: str | None = None,
                 wire: str | None = None) -> None:
        self.status = int(status)
        self.body = safe_error_body(self.status, text)
        self.retry_after = retry_after
        self.endpoint: str | None = None
        self.inside = inside  # "stream" or "reply": the error came inside a 2xx reply
        self.in_stream = inside == "stream"
        self.wire = wire
        if error_type is None and error_message is None and self.body[:1] in ("{", "["):
            error_type, error_message = _error_fields(self.body)
        self.error_type = error_type
        self.error_message = error_message
        self.quota = self._is_quota()
        self.hint: str | None = QUOTA_HINT if self.quota else None
        super().__init__(self._message())

    def _is_quota(self) -> bool:
        if self.error_type in _QUOTA_TYPES:
            return True
        if self.status != 429 or self.retry_after is not None or "retryDelay" in self.body:
            return False
        return bool(_QUOTA_WORDS.search(self.error_message or self.body))

    def _message(self) -> str:
        if self.inside:
            said = ": ".join(p for p in (self.error_type, redact_identifiers(self.error_message or "")) if p)
            shown = capped_error_body(said or self.body)
            text = f"LLM {self.status}: {shown} (inside the {self.wire + ' ' if self.wire else ''}{self.inside})"
        else:
            shown = capped_error_body(self.body)
            text = f"LLM {self.status}: {shown}" if shown else f"LLM {self.status}"
        if self.endpoint:
            text += f" (POST {self.endpoint})"
        if self.hint:
            text += f" — {self.hint}"
        return text

    @property
    def text(self) -> str:
        """Deprecated alias of `.body`."""
        return self.body

    def scrub(self, secrets: Iterable[str]) -> "ProviderError":
        """Mask `secrets` (and token-shaped strings) in `.body` and the message, in place."""
        self.body = redact_secrets(self.body, secrets)
        if self.error_message:
            self.error_message = redact_secrets(self.error_message, secrets)
        self.args = (self._message(),)
        return self

    def locate(self, endpoint: str, hint: str | None = None) -> "ProviderError":
        """Name the (safe) endpoint the request went to and what to check, in place (a hint the
        error already carries, such as the quota one, stays unless a new one is given)."""
        self.endpoint, self.hint = endpoint, hint or self.hint
        self.args = (self._message(),)
        return self


_HttpError = ProviderError


class ProviderResponseError(ToolnexusError, ValueError):
    """A 2xx reply whose body is not the shape the wire dialect expects (never retried)."""


class ResponseTooLarge(ProviderResponseError, InputTooLarge):
    """A 2xx reply (whole body or stream) above the client's `max_response_bytes`; never retried."""


class RunTimeout(ToolnexusError, TimeoutError):
    """The run's `timeout_ms` budget ran out."""

    def __init__(self, timeout_ms: int | float | None) -> None:
        self.timeout_ms = timeout_ms
        super().__init__(f"run timeout after {timeout_ms}ms (client timeout_ms budget)")


class RunCancelled(ToolnexusError):
    """The run's `cancel` event was set."""

    def __init__(self, message: str = "run cancelled") -> None:
        super().__init__(message)


class ResumeError(ToolnexusError, ValueError):
    """A durable resume that cannot proceed (message prefix `toolnexus: cannot resume — `)."""
