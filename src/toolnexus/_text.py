"""Text that can always be encoded: what we do with lone surrogates and NUL characters.

`"\\ud800"` is valid JSON, and Python decodes it to a `str` that UTF-8 cannot encode (half of a
UTF-16 pair, a *lone surrogate*); bytes read with `surrogateescape` make them too. Such a string
travels through Python happily and fails only where it is written: a store, a file, a socket.
So the writers use these, each choosing the rule that fits what it writes:

- `json_text(text)` — JSON we store: every surrogate becomes its `\\uXXXX` escape, so the text is
  valid UTF-8 and decodes back to exactly the same string (lossless; a store keeps what the model
  sent).
- `plain_text(text)` — plain text we store outside JSON (trace lines): lone surrogates and NUL
  (which PostgreSQL's `TEXT` refuses) become U+FFFD.
- `printable(text)` — text for a terminal or a log: lone surrogates become U+FFFD.
- `strict_json_bytes(body)` — a body for a peer (a provider, an A2A agent or client, an MCP
  client): JSON written with `ensure_ascii` is ASCII already, but spells a lone surrogate as a
  `\\udXXX` escape that strict parsers refuse; each becomes `\\ufffd` (escaped pairs, which encode
  real characters, are kept). `strict_json(value)` writes a value that way.
- `strict_value(value)` — the same rule on the strings of a JSON value, for a wire whose encoder
  is not ours (the MCP SDK's refuses a lone surrogate outright).

Each is a no-op, at the cost of one flag test or one encode, for the usual text. Nothing here
decides *whether* such text is acceptable (tool arguments, for one, are refused instead: see
`_shapes.json_problem`).
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# In JSON written with ensure_ascii: an escaped pair (kept), or one lone escape (replaced); the
# backslash must not itself be escaped, so it follows an even run of backslashes.
_ESCAPES = re.compile(rb"(?<!\\)((?:\\\\)*)(\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|\\ud[89a-f][0-9a-f]{2})")


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_surrogate(text: str) -> int:
    """The index of the first surrogate code point in `text`, or -1."""
    if _encodes(text):
        return -1
    found = _SURROGATE.search(text)
    return found.start() if found is not None else -1


def json_text(text: str) -> str:
    """JSON text with every surrogate written as its `\\uXXXX` escape (see the module docstring)."""
    if _encodes(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def plain_text(text: str) -> str:
    """`text` with lone surrogates and NUL characters replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if _encodes(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def printable(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD (a terminal's encoder refuses them)."""
    if _encodes(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def _fix(match: "re.Match[bytes]") -> bytes:
    escape = match.group(2)
    return match.group(1) + (escape if len(escape) == 12 else b"\\ufffd")


def strict_json_bytes(body: bytes) -> bytes:
    """An ASCII JSON body with each lone `\\udXXX` escape made `\\ufffd` (see the module docstring)."""
    if b"\\ud" not in body:
        return body
    return _ESCAPES.sub(_fix, body)


def strict_json(value: Any) -> bytes:
    """`value` as a JSON body for a peer: ASCII, each lone surrogate sent as `\\ufffd`."""
    return strict_json_bytes(json.dumps(value).encode("ascii"))


def strict_text(text: str) -> str:
    """`text` as a strict peer reads `strict_json_bytes`' output: a surrogate pair joined into its
    character, a lone surrogate made U+FFFD."""
    if _encodes(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def strict_value(value: Any) -> Any:
    """A JSON value with `strict_text` applied to every string, keys too (the same object when
    nothing changes)."""
    if isinstance(value, str):
        return strict_text(value)
    if isinstance(value, dict):
        items = [(strict_value(k), strict_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list):
        out = [strict_value(v) for v in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    return value
