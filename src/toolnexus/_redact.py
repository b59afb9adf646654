"""What counts as a credential in a header, a URL or an environment, and how we mask it.

One rule for every place that must not show or forward secrets: error bodies and tool errors
(mask the values we sent), reprs of configs (`ServerSpec`, the agent runtime), and redirects that
leave the origin (drop what is not plainly harmless). A header is treated as a credential when
its lower-cased name contains one of `CREDENTIAL_WORDS` (`authorization`, `x-api-key`,
`cookie`, `x-auth-token`, `openai-organization`...); a value that came from `${ENV}` expansion
is always treated as one (see `toolnexus._env`), whatever the header is called.

Pure functions; nothing here logs or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

REDACTED = "«redacted»"
CREDENTIAL_WORDS = ("auth", "key", "token", "secret", "cookie", "session", "signature", "password", "credential",
                    "organization", "project")
SAFE_HEADERS = frozenset({"accept", "accept-encoding", "accept-language", "content-type", "content-length",
                          "content-language", "content-encoding", "user-agent", "cache-control", "host",
                          "connection", "transfer-encoding"})


def is_credential_header(name: Any) -> bool:
    """True when a header name looks like it carries a credential or an account identifier."""
    lowered = str(name).lower()
    return any(word in lowered for word in CREDENTIAL_WORDS)


def credential_values(headers: Mapping[Any, Any] | None, *, all_values: bool = False) -> list[str]:
    """The values to mask in anything shown: credential headers' values (all values with
    `all_values`), plus each whitespace-separated part of 8+ characters (`Bearer <token>`)."""
    found: list[str] = []
    for name, value in (headers or {}).items():
        if isinstance(value, str) and value and (all_values or is_credential_header(name)):
            found.append(value)
            found.extend(part for part in value.split() if len(part) >= 8)
    return found


def mask_headers(headers: Mapping[Any, Any] | None) -> dict[str, str] | None:
    """A copy safe to show: every value masked (header names are kept, they help debugging)."""
    if headers is None:
        return None
    return {str(k): REDACTED for k in headers}


def redact_url(url: str) -> str:
    """`url` with a userinfo password and credential-looking query values masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    query = (
        "&".join(
            f"{piece.partition('=')[0]}={REDACTED}"
            if is_credential_header(unquote_plus(piece.partition("=")[0]))
            else piece
            for piece in parts.query.split("&")
        )
        if parts.query
        else ""
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret of 4+ characters replaced by `«redacted»` (longest first)."""
    for secret in sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
