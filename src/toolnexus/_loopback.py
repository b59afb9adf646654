"""Whether a model endpoint is on this machine: the one rule for "a local server needs no API key".

`create_client` and the `toolnexus` command both use it: with no key configured, a loopback base
URL (`127.0.0.0/8`, `::1`, `localhost` and its subdomains) gets the placeholder key the agent
runtime sends (a local OpenAI-compatible server — llama.cpp, Ollama, vLLM — takes none); any other
endpoint still fails with the pinned `No API key` error, so a missing key is never discovered as a
401 from a paid provider. Names are not resolved: a hostname that merely points at 127.0.0.1 is
not loopback here.
"""

from __future__ import annotations

import ipaddress
from typing import Optional
from urllib.parse import urlsplit

LOOPBACK_PLACEHOLDER_KEY = "unused"
"""The key sent when none is configured and the endpoint is local (the agent runtime's own placeholder)."""


def is_loopback_url(url: Optional[str]) -> bool:
    """True for an http(s) URL whose host is a loopback IP literal or `localhost`."""
    if not isinstance(url, str) or not url:
        return False
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not host:
        return False
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
