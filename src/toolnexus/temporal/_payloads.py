"""`ExternalPayloadCodec`: large payloads by reference, so long transcripts stay out of history.

Temporal refuses a payload over 2 MB and a workflow history over 50 MB. An agent run puts each
LLM request (the transcript so far) and each response into history, so a long run outgrows both.
This payload codec stores every payload larger than `threshold` bytes in a directory, named by
its SHA-256, and leaves only that 64-character reference in history; decoding reads it back (and
checks the hash). Configure the same codec, on the same shared directory, on every worker's and
every host's client (`codec.data_converter()` for `Client.connect(data_converter=...)`), and set
`TemporalOptions(max_payload_bytes=None)` on the workers, since the payload check then sees
values before they are offloaded.

The directory must be reachable by every process of the fleet (one machine's disk, or a shared
volume). For object storage, subclass and override `put` / `get`. Files are written atomically
(temporary name, then rename) and never deleted by this codec: remove what belongs to runs whose
history you have deleted.

Without a codec, an over-limit request fails the turn with `PayloadTooLarge` saying so, before
anything is sent: a clear error, never a silently truncated transcript.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from .._fs import write_atomic
from ..errors import ToolnexusValueError

REFERENCE_ENCODING = b"binary/toolnexus-reference"


class ExternalPayloadCodec(PayloadCodec):
    """Payloads over `threshold` bytes go to `directory` by content hash (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], *, threshold: int = 256 * 1024) -> None:
        if not isinstance(threshold, int) or threshold < 1024:
            raise ToolnexusValueError(f"toolnexus.temporal: ExternalPayloadCodec threshold must be an integer >= 1024, "
                             f"got {threshold!r}")
        self.directory = Path(directory)
        self.threshold = threshold

    def data_converter(self) -> DataConverter:
        """The default data converter with this codec, for `Client.connect(data_converter=...)`."""
        return dataclasses.replace(DataConverter.default, payload_codec=self)

    # -- storage (override for object storage) ---------------------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` (blocking; runs off the event loop)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / key
        if target.exists():
            return
        write_atomic(
            str(target), data, mode=0o600, fsync=True
        )  # content-addressed: an existing file is never rewritten, so it must be whole

    def get(self, key: str) -> bytes:
        """The bytes stored under `key` (blocking; runs off the event loop)."""
        try:
            return (self.directory / key).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"toolnexus.temporal: payload {key} is not in {self.directory} — every worker "
                                    "and host must share the codec's directory") from None

    # -- the codec -------------------------------------------------------------------------------------

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            data = payload.SerializeToString()
            if len(data) <= self.threshold:
                out.append(payload)
                continue
            key = hashlib.sha256(data).hexdigest()
            await asyncio.to_thread(self.put, key, data)
            out.append(Payload(metadata={"encoding": REFERENCE_ENCODING}, data=key.encode("ascii")))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != REFERENCE_ENCODING:
                out.append(payload)
                continue
            key = payload.data.decode("ascii")
            data: Any = await asyncio.to_thread(self.get, key)
            if hashlib.sha256(data).hexdigest() != key:
                raise ToolnexusValueError(
                    f"toolnexus.temporal: payload {key} in {self.directory} does not match its hash "
                    "(changed or truncated on disk)"
                )
            out.append(Payload.FromString(data))
        return out
