"""Which network addresses a model-chosen URL may reach: public unicast ones only.

A URL from a model (or from a page it read) must not reach the user's own machine, LAN,
cloud metadata service or carrier-grade NAT. Hosts are resolved first and *every* address
is checked; the connection then goes to a checked address, so a DNS answer cannot change
between the check and the connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias

Resolver: TypeAlias = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> IP addresses``; raises OSError when the host does not resolve."""

_CGNAT: Final = ipaddress.ip_network("100.64.0.0/10")
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")


async def system_resolver(host: str, port: int) -> list[str]:
    """The operating system's resolver (getaddrinfo), IPv4 addresses first."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[str] = []
    for family, *_rest, sockaddr in sorted(infos, key=lambda info: info[0] != socket.AF_INET):
        del family
        address = str(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(address: str) -> str | None:
    """Why ``address`` may not be reached (e.g. "loopback"), or None when it is public."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
            address.split("%", 1)[0]
        )
    except ValueError:
        return "unrecognised"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            reason = address_refusal(str(embedded))
            if reason is not None:
                return reason
    checks: tuple[tuple[bool, str], ...] = (
        (ip.is_loopback, "loopback"),
        (ip.is_unspecified, "unspecified"),
        (ip.is_link_local, "link-local"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "carrier-grade NAT"),
        (ip.is_multicast, "multicast"),
        (ip.is_private, "private"),
        (ip.is_reserved, "reserved"),
        (not ip.is_global, "non-public"),
    )
    for refused, reason in checks:
        if refused:
            return reason
    return None
