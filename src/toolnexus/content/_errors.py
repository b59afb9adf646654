"""The two content-part errors: an invalid part, and a part a provider wire has no block for.

They live here, not in the client, because building a part (a file read, a data: URL) needs no
client at all; the client re-exports `ContentPartError` under its old import path.
"""

from __future__ import annotations

from typing import Optional

from ..errors import ToolnexusError


class ContentPartError(ToolnexusError, ValueError):
    """A content part that is malformed, too large, or built from an unusable source."""


class UnsupportedPartError(ToolnexusError, ValueError):
    """A valid part for which a provider wire has no block shape (e.g. audio on Anthropic)."""

    def __init__(self, part_type: str, mime_type: Optional[str], style: str) -> None:
        self.part_type = part_type
        self.mime_type = mime_type
        self.style = style
        message = f'no "{style}" block shape for a {part_type} part'
        if mime_type:
            message += f" ({mime_type})"
        super().__init__(message)
