"""Request bodies as JSON, with the parts that did not change since the last turn encoded once.

Every turn re-sends the whole transcript and every tool declaration: re-encoding all of it each
turn makes a long run quadratic and a big toolkit expensive per turn. So the loop hands the
transport lists that carry their JSON already (`EncodedList`): the tool declarations (encoded
once per toolkit change) and the transcript (each message encoded once, see `_prepared.py`).
`encode_payload` splices those fragments in and encodes only the rest; the bytes are what
`json.dumps(payload)` would have produced.

An `EncodedList` is still a `list`: a custom transport that reads the payload, or that calls
`json.dumps` itself, sees ordinary JSON data. Its fragments are trusted only while its length
matches them; the loop uses these lists only when no hook or `body_transform` can edit them.

The body is strict JSON whatever the transcript holds (every transport encodes it here): a
non-finite number is `null`, and a lone surrogate — a model's half emoji, a file read with
`surrogateescape` — is sent as U+FFFD (`toolnexus._text.strict_json_bytes`); valid pairs stay.
"""

from __future__ import annotations

from typing import Any, Callable

from .._encoded import EncodedList as EncodedList, dumps as _dumps, inner as inner
from .._text import strict_json_bytes


def encode_payload(payload: dict[str, Any], dumps: Callable[[Any], str] = _dumps) -> bytes:
    """The request body as UTF-8 JSON bytes (identical to `json.dumps(payload)`), built with one
    copy of the kept chunks."""
    if not any(type(value) is EncodedList for value in payload.values()) or \
            not all(type(key) is str for key in payload):
        return strict_json_bytes(dumps(payload).encode("utf-8"))
    out = [b"{"]
    for key, value in payload.items():
        out.append(f"{dumps(key)}: ".encode())
        if type(value) is EncodedList:
            out += value.pieces()
        else:
            out.append(dumps(value).encode("utf-8"))
        out.append(b", ")
    out[-1] = b"}"
    return strict_json_bytes(b"".join(out))
