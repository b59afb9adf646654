"""Where `webfetch` may connect: public addresses only, unless the host's allow-list says more.

The model picks the URL, so the URL is untrusted: without a guard a model (or a page it was told
to read) can make us fetch `http://169.254.169.254/` (cloud credentials), `http://127.0.0.1:2375/`
(a Docker socket), or an intranet page. The rule, applied to every hop (the first request and each
redirect):

1. Resolve the host (in the event loop's resolver, never blocking it). This is what turns every
   spelling of an address into the address itself: `2130706433`, `0x7f000001`, `0177.1`, `127.1`
   and `localhost` all resolve to `127.0.0.1`.
2. Every resolved address must be *public*: not loopback, private (10/8, 172.16/12, 192.168/16,
   fc00::/7), link-local (169.254/16, fe80::/10), shared (100.64/10), multicast, unspecified or
   reserved. IPv4 addresses wrapped in IPv6 (`::ffff:127.0.0.1`, 6to4, Teredo, NAT64
   `64:ff9b::/96`) are judged by the IPv4 address inside. If any address fails, the hop is refused.
3. The connection then goes to the address that was checked (the URL's host is replaced by it,
   with the original `Host` header and TLS server name kept), so a DNS answer that changes between
   the check and the connect (DNS rebinding) cannot slip through.

The allow-list (`builtins["webfetch_allow"]`, a list of strings) opts in: an entry is a host name
(`intranet.example`, matched exactly, case-insensitively; `*.example.com` matches subdomains), an
IP address, or a network in CIDR form (`10.0.0.0/8`). A host name entry allows that host whatever
it resolves to; an address or network entry allows the resolved addresses inside it.

Not here: the fetching itself (`_web.py`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, Optional, Union

from ..errors import ConfigError
from ._tooling import ToolError

IP = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class FetchAllow:
    """A parsed allow-list."""

    hosts: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[Union[ipaddress.IPv4Network, ipaddress.IPv6Network], ...] = ()

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or any(host.endswith(s) for s in self.suffixes)

    def allows_address(self, ip: IP) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)


def parse_allow(value: Any) -> FetchAllow:
    """The `webfetch_allow` config value (None ⇒ empty); `ConfigError` naming a bad entry."""
    if value is None:
        return FetchAllow()
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ConfigError(f"builtins['webfetch_allow'] must be a list of host names, addresses or CIDR networks, "
                          f"got {type(value).__name__}")
    hosts: set[str] = set()
    suffixes: list[str] = []
    networks = []
    for entry in value:
        if not isinstance(entry, str) or not entry.strip():
            raise ConfigError(f"builtins['webfetch_allow'] entries must be non-empty strings, got {entry!r}")
        text = entry.strip().lower().strip("[]")
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
            continue
        except ValueError:
            pass
        if text.startswith("*."):
            suffixes.append(text[1:])
        elif "/" in text or " " in text:
            raise ConfigError(f"builtins['webfetch_allow'] entry {entry!r} is neither a host name, an address "
                              "nor a CIDR network")
        else:
            hosts.add(text.rstrip("."))
    return FetchAllow(frozenset(hosts), tuple(suffixes), tuple(networks))


def _embedded_v4(ip: IP) -> Optional[ipaddress.IPv4Address]:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip.teredo is not None:
            return ip.teredo[1]
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(ip: IP) -> Optional[str]:
    """Why `ip` is not a public address (e.g. `"a loopback address"`), or None when it is."""
    inner = _embedded_v4(ip)
    if inner is not None:
        problem = address_problem(inner)
        return None if problem is None else f"{problem} (inside {ip})"
    for attr, what in (("is_loopback", "a loopback"), ("is_link_local", "a link-local"),
                       ("is_unspecified", "an unspecified"), ("is_multicast", "a multicast"),
                       ("is_private", "a private"), ("is_reserved", "a reserved")):
        if getattr(ip, attr):
            return f"{what} address"
    if not ip.is_global:
        return "a non-public address"
    return None


async def vet_host(host: str, port: int, allow: FetchAllow) -> str:
    """The address to connect to for `host`, or `ToolError` saying why the host is refused."""
    if not host:
        raise ToolError("the URL has no host")
    bare = host.strip("[]")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolError(f"could not resolve host {host}: {getattr(exc, 'strerror', None) or exc}") from None
    addresses: list[IP] = []
    for info in infos:
        try:
            ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        except ValueError:
            continue
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise ToolError(f"could not resolve host {host}")
    if allow.allows_host(bare):  # a host name on the allow-list: whatever it resolves to
        return str(addresses[0])
    for ip in addresses:
        problem = address_problem(ip)
        if problem is not None and not allow.allows_address(ip):
            shown = host if str(ip) == bare else f"{host} ({ip})"
            raise ToolError(
                f"refused to fetch {shown}: {problem}. Only public addresses are fetched by default; "
                "to allow this host, add it (or its network) to builtins['webfetch_allow']"
            )
    return str(addresses[0])
