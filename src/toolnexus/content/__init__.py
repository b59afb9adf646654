"""Content parts: images, files and audio in prompts, transcripts and tool results.

Build parts with `text()`, `image()`, `file()`, `audio()` (from a path, an open binary file,
bytes, a `data:` URL or an http(s) URL) or `part()` (from fields); pass them to `Client.run` in a
prompt list or return them from a tool in `ToolResult.parts`. Transcripts hold the canonical dict
form (`to_dict`), so they stay plain JSON; each provider wire encodes the parts it can carry
(`encode_part`) and the client degrades or refuses the rest.

Layout: `_parts.py` (model, validation, dict form, sizes), `_sources.py` (constructors),
`_blocks.py` (provider blocks), `_errors.py`. Standard library only; nothing here does network I/O.
"""

from __future__ import annotations

from ._blocks import encode_part
from ._errors import ContentPartError, UnsupportedPartError
from ._parts import (
                    MEDIA_TYPES,
                    ContentPart,
                    decoded_len,
                    describe_part,
                    estimate_tokens,
                    from_dict,
                    get_max_part_bytes,
                    is_part_dict,
                    normalize_parts,
                    placeholder_text,
                    set_max_part_bytes,
                    summarize,
                    to_dict,
                    validate,
)
from ._sources import audio, file, image, part, text

__all__ = [
    "MEDIA_TYPES",
    "ContentPartError",
    "UnsupportedPartError",
    "ContentPart",
    "text",
    "image",
    "file",
    "audio",
    "part",
    "set_max_part_bytes",
    "get_max_part_bytes",
    "encode_part",
    "summarize",
    "estimate_tokens",
    "validate",
    "to_dict",
    "from_dict",
    "is_part_dict",
    "normalize_parts",
    "describe_part",
    "placeholder_text",
    "decoded_len",
]
