"""`${NAME}` references in outbound header values, expanded from the environment at call time.

One rule for every header set we send (HTTP tools, OpenAPI imports, MCP remotes, A2A agents):
`${NAME}` with NAME in `[A-Za-z0-9_]+` becomes `os.environ[NAME]`, or `""` when unset; a bare
`$NAME` stays literal. A caller that must report unset variables passes `on_unset`, which gets
the variable and header names, never a value. Nothing here logs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Optional

ENV_REF = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def expand_headers(
    headers: Optional[Mapping[Any, Any]], on_unset: Optional[Callable[[str, str], None]] = None
) -> dict[str, str]:
    """A copy of `headers` (None ⇒ `{}`) with `${NAME}` in every value expanded.

    `on_unset(variable, header)` is called for each reference to an unset variable.
    """
    out: dict[str, str] = {}
    for key, value in (headers or {}).items():
        header = str(key)

        def lookup(match: re.Match[str], header: str = header) -> str:
            name = match.group(1)
            found = os.environ.get(name)
            if found is None:
                if on_unset is not None:
                    on_unset(name, header)
                return ""
            return found

        out[header] = ENV_REF.sub(lookup, str(value))
    return out
