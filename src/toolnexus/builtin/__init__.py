"""Built-in tools: `bash read write edit grep glob webfetch question apply_patch todowrite`.

One module per family — `shell` (bash), `files` (read/write/edit), `search` (grep/glob and their
glob matcher; the directory walker is `toolnexus._walk`, shared with skills), `web` (webfetch),
`patch` (apply_patch; the patch grammar is `_patch_text`), `interact` (question/todowrite) — and
`config` for the public API that selects and builds them. File and process work never runs on
the event loop: files go through worker threads, processes through asyncio subprocesses.
"""

from __future__ import annotations

from ._config import (
    BUILTIN_NAMES,
    BuiltinsConfig,
    builtin_shell,
    builtins_enabled,
    builtins_source,
    create_builtin_tools,
    select_builtins,
)
from ._search import IGNORE_DIRS
from ._settings import KILL_GRACE_MS

__all__ = [
    "BuiltinsConfig",
    "BUILTIN_NAMES",
    "IGNORE_DIRS",
    "KILL_GRACE_MS",
    "builtin_shell",
    "builtins_enabled",
    "create_builtin_tools",
    "builtins_source",
    "select_builtins",
]
