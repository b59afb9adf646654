"""The per-toolkit settings every built-in tool closes over, parsed from a `BuiltinsConfig`.

Parsing happens once, when the tools are built: `base_dir` is made absolute against the current
directory at that moment (so a later `chdir` does not move the tools), the `shell` prefix is taken
verbatim, and a `base_dir` that is not confined is reported once. The limits at the bottom are not
configurable from the public dict; tests build `BuiltinSettings` directly to shrink them.

Not here: toggles (`tools`, `enabled`, `disabled`) — those decide *which* tools exist and live in
`_config.py`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .._diag import warn_once
from ..errors import ConfigError, ToolnexusTypeError
from ._netguard import FetchAllow, parse_allow

KILL_GRACE_MS = 2000
"""Grace between SIGTERM and SIGKILL when `bash` stops a process group."""


BASH_MAX_TIMEOUT_MS = 600_000
"""The longest `bash` timeout a model may ask for (10 minutes); longer requests are clamped."""
EDIT_MAX_BYTES = 64 * 1024 * 1024
"""`edit` and `apply_patch` hold a whole file in memory; larger files are refused."""


@dataclass(frozen=True)
class BuiltinSettings:
    """What the tools of one `create_builtin_tools` / `select_builtins` call share."""

    base_dir: Optional[str] = None
    confine: bool = False
    shell: Optional[tuple[str, ...]] = None  # None: probed on the first `bash` call
    kill_grace: float = KILL_GRACE_MS / 1000
    bash_output_head: int = 10_000  # bytes of the start of `bash` output kept
    bash_output_tail: int = 20_000  # bytes of the end of `bash` output kept
    bash_exit_linger: float = 0.25  # seconds to wait for the pipe to close after the shell exits
    read_max_bytes: int = 256 * 1024  # text `read` output cap
    media_max_bytes: int = 20 * 1024 * 1024  # media `read` cap
    edit_max_bytes: int = EDIT_MAX_BYTES  # `edit` refuses larger files
    grep_max_file_bytes: int = 64 * 1024 * 1024  # `grep` scans at most this much of one file
    grep_max_line_bytes: int = 1024 * 1024  # longer lines are matched on their first part only
    grep_show_line_chars: int = 2000  # a matched line is shown up to this many characters
    grep_line_budget: float = 1.0  # seconds one line's regex search may take (catastrophic backtracking)
    grep_regex_budget: float = 60.0  # seconds of matching one grep call may spend in all
    bash_max_timeout_ms: float = BASH_MAX_TIMEOUT_MS
    fetch_max_bytes: int = 2 * 1024 * 1024  # `webfetch` body cap
    fetch_allow: FetchAllow = FetchAllow()  # `webfetch_allow`: non-public hosts webfetch may reach
    fetch_max_redirects: int = 10


def _first_key(cfg: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def parse_shell(value: Any) -> Optional[tuple[str, ...]]:
    """The `shell` key as an argv prefix, or None when absent."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, str) and p for p in value):
        return tuple(value)
    raise ConfigError(
        "builtins['shell'] must be a non-empty list of strings (an argv prefix such as "
        f"[\"/bin/bash\", \"-c\"]), got {value!r}"
    )


def check_config(cfg: Any) -> None:
    """`TypeError` unless `cfg` is a `BuiltinsConfig` (None, a bool or a dict)."""
    if cfg is not None and not isinstance(cfg, (bool, Mapping)):
        raise ToolnexusTypeError(f"builtins config must be a bool or a dict, got {type(cfg).__name__}")


def settings_from_config(cfg: Any) -> BuiltinSettings:
    """Parse `base_dir`/`baseDir`, `confine_to_base_dir`/`confineToBaseDir`, `shell`,
    `webfetch_allow`/`webfetchAllow` (see `_netguard`) and `bash_max_timeout_ms`/`bashMaxTimeoutMs`."""
    check_config(cfg)
    if not isinstance(cfg, Mapping):
        return BuiltinSettings()
    base_dir = _first_key(cfg, "base_dir", "baseDir")
    if base_dir is not None and not isinstance(base_dir, (str, os.PathLike)):
        raise ToolnexusTypeError(f"builtins['base_dir'] must be a path string, got {type(base_dir).__name__}")
    base = os.path.abspath(os.fspath(base_dir)) if base_dir else None
    confine = bool(_first_key(cfg, "confine_to_base_dir", "confineToBaseDir"))
    if base and not confine:
        warn_once(
            f"builtins-unconfined:{base}",
            f"[toolnexus] builtins base_dir {base} is not enforced — absolute paths and ../ can "
            "leave it; set confine_to_base_dir to keep file tools inside it",
        )
    cap = _first_key(cfg, "bash_max_timeout_ms", "bashMaxTimeoutMs")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 0):
        raise ConfigError(f"builtins['bash_max_timeout_ms'] must be a positive number of milliseconds, got {cap!r}")
    return BuiltinSettings(base_dir=base, confine=confine, shell=parse_shell(cfg.get("shell")),
                           fetch_allow=parse_allow(_first_key(cfg, "webfetch_allow", "webfetchAllow")),
                           bash_max_timeout_ms=BASH_MAX_TIMEOUT_MS if cap is None else cap)
