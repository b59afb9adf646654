"""The skill source from `create_toolkit`'s options: directories, data defs, a provider, filters.

A provider is the host's code and may fail or do I/O: a sync one runs in a thread, an async one
is awaited, and one that raises (or returns something other than `SkillDef`s) is reported on
stderr and contributes nothing, so one broken provider does not stop the toolkit from loading.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Optional, Union

from .._diag import warn
from ..errors import ToolnexusTypeError
from ._loader import aload_skills
from ._model import SkillDef, SkillSource

Provider = Callable[[], Union[list[SkillDef], Awaitable[list[SkillDef]]]]


async def _provider_defs(provider: Provider) -> list[SkillDef]:
    try:
        if inspect.iscoroutinefunction(provider):
            result = await provider()
        else:
            result = await asyncio.to_thread(provider)
        if inspect.isawaitable(result):
            result = await result
        defs = list(result or [])
        bad = [type(d).__name__ for d in defs if not isinstance(d, SkillDef)]
        if bad:
            raise ToolnexusTypeError(f"expected a list of SkillDef, got an item of type {bad[0]}")
        return defs
    except Exception as exc:
        warn(f"[toolnexus] skill provider failed: {exc}")
        return []


async def skill_source_from_options(
    skills_dir: Union[str, list[str], None] = None,
    skills: Optional[list[SkillDef]] = None,
    skill_provider: Optional[Provider] = None,
    skills_filter: Optional[dict[str, bool]] = None,
    sample_limit: int = 0,
    disable_skills: Optional[list[str]] = None,
) -> Optional[SkillSource]:
    """The skills these options name, or `None` when none of dir, defs or provider is given.

    `disable_skills` entries join the filter as `False`; an explicit filter entry wins. Unknown
    names are reported by the skill filter itself.
    """
    if skills_dir is None and skills is None and skill_provider is None:
        return None
    defs = list(skills or [])
    if skill_provider is not None:
        defs += await _provider_defs(skill_provider)
    filt = dict(skills_filter or {})
    for name in disable_skills or []:
        filt.setdefault(name, False)
    return await aload_skills(skills_dir, skills=defs or None, filter=filt or None, sample_limit=sample_limit)
