"""A list that carries its JSON encoding, so a request body can splice it in unchanged.

It sits below the toolkit and the client because both build these lists: the toolkit its tool
declarations (encoded once per change), the client the transcript (each message encoded once).
`client/_body.py` says how the request body uses them.

`dumps` is the one JSON writer of request bodies: strict JSON a provider accepts. A non-finite
number (which only a model's own refused arguments can bring back into a transcript) is written as
`null` instead of Python's non-JSON `NaN`; lone surrogates are made U+FFFD where the body is
finished (`body.encode_payload`, see `toolnexus._text`).
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Optional


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """`json.dumps(value)`, but strict JSON: a non-finite number is written as `null`."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


_dumps = dumps


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
