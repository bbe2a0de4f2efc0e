"""Which local user opened a TCP connection: the uid of the client's socket, from
``/proc/net/tcp`` and ``/proc/net/tcp6``.

Why: every local user can reach a loopback port, and a server without an API key must not
serve the others. Linux lists each TCP socket of the network namespace with its owner's
uid; the client's socket is the one whose local end is the request's client address and
whose remote end is the server's address (``scope["client"]`` and ``scope["server"]``).
Looked up while the request is being served, so the socket cannot have gone away (its
client waits for the answer). Anything that cannot be read or matched is ``None``: the
caller refuses then. Each table is read once per lookup and bounded in size.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
MAX_TABLE_BYTES = 64 * 1024 * 1024
"""A table larger than this is not read (the lookup answers ``None``)."""


class PeerCell:
    """The owner of one connection, once looked up (shared by its requests)."""

    __slots__ = ("known", "uid")

    def __init__(self, uid: int | None = None, *, known: bool = False) -> None:
        self.known = known
        self.uid = uid


def unix_peer(transport: asyncio.BaseTransport) -> PeerCell | None:
    """The owner of a Unix-socket connection (``SO_PEERCRED``: the kernel's word, taken when
    it connected), or None for any other transport."""
    sock = transport.get_extra_info("socket")
    if sock is None or getattr(sock, "family", None) != socket.AF_UNIX:
        return None
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", credentials)
    except (OSError, AttributeError, struct.error):
        return PeerCell(None, known=True)  # a Unix socket whose peer cannot be told: refused
    return PeerCell(uid, known=True)


def available() -> bool:
    """True where the socket tables can be read (Linux with ``/proc``)."""
    return TABLES[0].is_file()


def _proc_address(host: str, port: int, *, six: bool) -> str | None:
    """``host:port`` as the table spells it (each 32-bit word in host byte order, hex)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv4Address):
        if not six:
            packed = address.packed
            return f"{struct.unpack('=I', packed)[0]:08X}:{port:04X}"
        address = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + address.packed)
    elif not six:
        mapped = address.ipv4_mapped
        if mapped is None:
            return None
        return _proc_address(str(mapped), port, six=False)
    words = struct.unpack("=4I", address.packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the socket at ``client`` connected to ``server``, or ``None``."""
    for table in TABLES:
        six = table.name == "tcp6"
        local = _proc_address(client[0], int(client[1]), six=six)
        remote = _proc_address(server[0], int(server[1]), six=six)
        if local is None or remote is None:
            continue
        uid = _find(table, local, remote)
        if uid is not None:
            return uid
    return None


def _find(table: Path, local: str, remote: str) -> int | None:
    try:
        with table.open("rb") as stream:
            data = stream.read(MAX_TABLE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_TABLE_BYTES:
        return None
    needle = f" {local} {remote} ".encode()
    at = data.find(needle)
    if at < 0:
        return None
    end = data.find(b"\n", at)
    fields = data[at : end if end >= 0 else len(data)].split()
    # local remote st tx:rx tr:when retrnsmt uid ...
    if len(fields) < 7:
        return None
    try:
        return int(fields[6])
    except ValueError:
        return None
