"""Request bodies as JSON, with the parts that did not change since the last turn encoded once.

Every turn re-sends the whole transcript and every tool declaration: re-encoding all of it each
turn makes a long run quadratic and a big toolkit expensive per turn. So the loop hands the
transport lists that carry their JSON already (`EncodedList`): the tool declarations (encoded
once per toolkit change) and the transcript (each message encoded once, see `prepared.py`).
`encode_payload` splices those fragments in and encodes only the rest; the bytes are what
`json.dumps(payload)` would have produced.

An `EncodedList` is still a `list`: a custom transport that reads the payload, or that calls
`json.dumps` itself, sees ordinary JSON data. Its fragments are trusted only while its length
matches them; the loop uses these lists only when no hook or `body_transform` can edit them.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Optional

__all__ = ["EncodedList", "encode_payload", "inner"]

_dumps = json.dumps


class EncodedList(list):
    """A list that carries its JSON: `chunks` are its elements' UTF-8 encodings, in order.

    A chunk may hold several elements (`json.dumps(batch)[1:-1]`): one encoder call per batch
    is much cheaper than one per element. `covered` is how many elements the chunks encode.
    """

    __slots__ = ("chunks", "covered")

    def __init__(self, items: Iterable[Any] = (), chunks: Optional[list[bytes]] = None) -> None:
        super().__init__(items)
        if chunks is None:
            chunks = [inner(self)] if self else []
        self.chunks: list[bytes] = chunks  # none of them empty
        self.covered = len(self)  # how many elements the chunks encode

    def pieces(self) -> list[bytes]:
        """This list's JSON in pieces: the kept chunks, or a fresh encoding if it was resized."""
        if self.covered != len(self):
            return [_dumps(list(self)).encode("utf-8")]
        return [b"[", b", ".join(self.chunks), b"]"]


def inner(items: list[Any]) -> bytes:
    """`json.dumps(items)` without its brackets, as UTF-8: a chunk for `EncodedList`."""
    return _dumps(items)[1:-1].encode("utf-8") if items else b""


def encode_payload(payload: dict[str, Any], dumps: Callable[[Any], str] = _dumps) -> bytes:
    """The request body as UTF-8 JSON bytes (identical to `json.dumps(payload)`), built with one
    copy of the kept chunks."""
    if not any(type(value) is EncodedList for value in payload.values()) or \
            not all(type(key) is str for key in payload):
        return dumps(payload).encode("utf-8")
    out = [b"{"]
    for key, value in payload.items():
        out.append(f"{dumps(key)}: ".encode("utf-8"))
        if type(value) is EncodedList:
            out += value.pieces()
        else:
            out.append(dumps(value).encode("utf-8"))
        out.append(b", ")
    out[-1] = b"}"
    return b"".join(out)
