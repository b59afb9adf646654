"""Where the project's shared contract lives: `../shared` beside the repository (as CI lays it
out), overridable with `TOOLNEXUS_SHARED`; `/work/shared` as the development fallback."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    candidates = [os.environ.get("TOOLNEXUS_SHARED"), REPO.parent / "shared", "/work/shared"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "fixtures").is_dir():
            return Path(candidate)
    raise FileNotFoundError(
        "the shared contract folder (fixtures, seed) was not found: set TOOLNEXUS_SHARED or place it at "
        f"{REPO.parent / 'shared'}"
    )


SHARED = shared_dir()
FIXTURES = SHARED / "fixtures"
SEED_PAGE = SHARED / "seed" / "agent-runtime-resume.txt"
