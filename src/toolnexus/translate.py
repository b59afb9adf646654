"""Single-turn translation: an OpenAI-shaped request in, one provider call, an OpenAI-shaped
result out (`Client.translate`). The implementation lives with the client
(`toolnexus.client.translation`); this module is its public home."""

from __future__ import annotations

from .client.translation import *  # noqa: F403 - the public names, re-exported
from .client.translation import __all__, translate_with_client  # noqa: F401

