"""The public face of the built-ins: which are on, building them, and the shell they run.

`create_builtin_tools` builds all ten in the pinned order regardless of toggles; `select_builtins`
applies the toggles (`disabled`, `enabled`, and the `tools` drop-list, where only `False`
removes) and resolves the shell right away when `bash` survives, so a machine without one fails
at construction with the pinned `RuntimeError` rather than on the model's first command. Tools
built by `create_builtin_tools` probe for the shell on the first `bash` call instead.

`builtins_source` is the toolkit's source of them: the `builtins` option of `create_toolkit`
when given, else the config's `builtins` block (a bool or a dict), else all on.

Config errors (a `tools` or `shell` of the wrong shape, a non-dict config) raise `TypeError` /
`ValueError` naming the key; unknown keys and unknown tool names are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

from ..errors import ToolnexusTypeError
from ..tool_source import ToolList
from ..types import Tool
from ._files import make_edit, make_read, make_write
from ._interact import make_question, make_todowrite
from ._patch import make_apply_patch
from ._search import make_glob, make_grep
from ._settings import BuiltinSettings, check_config, parse_shell, settings_from_config
from ._shell import find_shell, make_bash
from ._web import make_webfetch

BuiltinsConfig = Union[bool, dict]

_FACTORIES: dict[str, Callable[[BuiltinSettings], Tool]] = {
    "bash": make_bash,
    "read": make_read,
    "write": make_write,
    "edit": make_edit,
    "grep": make_grep,
    "glob": make_glob,
    "webfetch": make_webfetch,
    "question": lambda settings: make_question(),
    "apply_patch": make_apply_patch,
    "todowrite": lambda settings: make_todowrite(),
}

BUILTIN_NAMES: tuple[str, ...] = tuple(_FACTORIES)
"""The ten built-in tool names, in their pinned order."""


def builtins_enabled(cfg: Optional[BuiltinsConfig]) -> bool:
    """`None` ⇒ on; a bool ⇒ itself; a dict ⇒ off only for `disabled: True` or `enabled: False`."""
    check_config(cfg)
    if cfg is None:
        return True
    if isinstance(cfg, bool):
        return cfg
    return not (cfg.get("disabled") is True or cfg.get("enabled") is False)


def create_builtin_tools(cfg: Optional[BuiltinsConfig] = None) -> list[Tool]:
    """All ten built-ins (`source="builtin"`), in order, ignoring toggles; `base_dir` etc. apply."""
    settings = settings_from_config(cfg)
    return [factory(settings) for factory in _FACTORIES.values()]


def _dropped(cfg: Mapping[str, Any]) -> set[str]:
    toggles = cfg.get("tools")
    if toggles is None:
        return set()
    if not isinstance(toggles, Mapping):
        raise ToolnexusTypeError(
            f"builtins['tools'] must be a dict of tool name to bool (False removes), got {type(toggles).__name__}"
        )
    return {name for name, on in toggles.items() if on is False}


def select_builtins(cfg: Optional[BuiltinsConfig]) -> list[Tool]:
    """The built-ins a toolkit exposes under `cfg` (empty when off); raises when `bash` has no shell."""
    if not builtins_enabled(cfg):
        return []
    dropped = _dropped(cfg) if isinstance(cfg, Mapping) else set()
    names = [name for name in BUILTIN_NAMES if name not in dropped]
    settings = settings_from_config(cfg)
    if "bash" in names and settings.shell is None:
        settings = dataclasses.replace(settings, shell=find_shell())
    return [_FACTORIES[name](settings) for name in names]


def builtin_shell(cfg: Optional[BuiltinsConfig] = None) -> list[str]:
    """The argv prefix `bash` runs commands with: `cfg["shell"]` verbatim, else the first found."""
    check_config(cfg)
    explicit = parse_shell(cfg.get("shell")) if isinstance(cfg, Mapping) else None
    return list(explicit or find_shell())


def builtins_source(option: Optional[BuiltinsConfig] = None, config: Optional[Mapping[str, Any]] = None) -> ToolList:
    """The built-ins a toolkit offers: `option` when not `None`, else `config["builtins"]` when it
    is a bool or a dict, else all ten. Tools the caller passes under a built-in's name shadow it."""
    cfg = option if option is not None else (config or {}).get("builtins")
    if cfg is not None and not isinstance(cfg, (bool, dict)):
        cfg = None
    return ToolList("builtin", select_builtins(cfg))
