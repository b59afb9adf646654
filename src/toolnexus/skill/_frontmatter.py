"""`SKILL.md` frontmatter: the `---` block's `name`/`description`, read leniently.

The block is parsed with PyYAML's safe loader minus YAML 1.1's implicit typing: plain scalars
stay the text the author wrote, so `name: yes` is `"yes"` (not `"True"`), `name: 0x1F` is
`"0x1F"` and `description: 1.50` is `"1.50"`. Only an empty plain value still means "no value",
and `<<` merge keys still work. When YAML fails, yields a non-mapping, or `name`/`description`
holds a list or map, a line scanner recovers plain `key: value` lines (so
`description: Use when: x` loads). This module decides nothing about skipping; it reports what
it found and the YAML error text, and `loader` turns that into a skill or a skip.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

_BLOCK = re.compile(r"^---\r?\n(.*?)\r?\n---\r?\n?(.*)$", re.DOTALL)
_FALLBACK_LINE = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*):[ \t]*(.*)$")
_FALLBACK_KEYS = ("name", "description")
_NOT_A_PLAIN_VALUE = tuple("|>&*[{!")  # block scalars, anchors, aliases, flow collections, tags
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _LiteralScalarLoader(yaml.SafeLoader):
    """SafeLoader whose plain scalars resolve to `str`, except empty (null) and `<<` (merge)."""


_LiteralScalarLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag == _MERGE_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_LiteralScalarLoader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^$"), [""])


@dataclass
class Frontmatter:
    """Scalar fields (`str(key) -> stripped text`), the body after the block, the YAML error."""

    fields: dict[str, str]
    body: str
    yaml_error: str = ""
    has_block: bool = True


def _scalar_fields(data: dict[Any, Any]) -> dict[str, str]:
    return {str(k): str(v).strip() for k, v in data.items() if isinstance(v, (str, int, float, bool))}


def _fill_from_lines(raw: str, fields: dict[str, str]) -> None:
    """The lenient scanner: column-0 `name:`/`description:` lines fill keys still missing."""
    for line in raw.split("\n"):
        if not line or line[0] in " \t#":
            continue
        match = _FALLBACK_LINE.match(line)
        if match is None or match.group(1) not in _FALLBACK_KEYS or match.group(1) in fields:
            continue
        value = match.group(2).strip()
        if not value or value.startswith(_NOT_A_PLAIN_VALUE):
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        fields[match.group(1)] = value


def parse_frontmatter(text: str) -> Frontmatter:
    """Split `text` into frontmatter fields and body; without a `---` block all of it is body."""
    block = _BLOCK.match(text)
    if block is None:
        return Frontmatter({}, text, has_block=False)
    raw, body = block.group(1), block.group(2)
    fields: dict[str, str] = {}
    yaml_error = ""
    try:
        data = yaml.load(raw, Loader=_LiteralScalarLoader)
    except Exception as exc:  # YAMLError, and RecursionError on absurd nesting: never a crash
        yaml_error = str(exc).replace("\n", " ").strip() or type(exc).__name__
        data = None
    if isinstance(data, dict):
        fields = _scalar_fields(data)
        lenient = any(k in data and k not in fields for k in _FALLBACK_KEYS)
    else:
        lenient = True
    if lenient:
        _fill_from_lines(raw, fields)
    return Frontmatter(fields, body, yaml_error)
