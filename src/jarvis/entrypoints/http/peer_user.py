"""Which local user opened a TCP connection: the owner of the client's socket, asked of the
kernel for that one socket (``NETLINK_SOCK_DIAG``, the interface ``ss`` uses).

Why: every local user can reach a loopback port, and a server without an API key must not
serve the others. The client's socket is the one whose local end is the request's client
address and whose remote end is the server's address (``scope["client"]`` and
``scope["server"]``); the kernel finds it by those four values in its connection hash and
answers with its owner's uid, whatever the number of sockets open. Reading the whole socket
table (``/proc/net/tcp``) instead cost 22 ms per connection with 8,000 sockets open, on the
event loop: 3,000 connections of another user held the owner's own request 44 s.

Looked up while the request is being served, so the socket is still there. A socket that no
process holds any more (its client closed it: an orphan, or a TIME_WAIT entry, which the
kernel reports as uid 0) tells no owner: a server run by root would have taken another
user's closed connection for its own. Anything that cannot be asked, found or read is
``None``: the caller refuses then.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
INET_DIAG_NOCOOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF

_HEADER = struct.Struct("=IHHII")
"""``nlmsghdr``: length, type, flags, sequence, port id."""
_REQUEST = struct.Struct("=BBBxI2s2s16s16sIII")
"""``inet_diag_req_v2``: family, protocol, extensions, states, then ``inet_diag_sockid``
(ports and addresses in network order, interface, cookie)."""
_ANSWER = struct.Struct("=BBBB2s2s16s16sI8sIIIII")
"""``inet_diag_msg``: family, state, timer, retransmits, the socket's id, then expiry, queues,
uid and inode."""
MAX_ANSWER_BYTES = 8192
"""One socket's answer is 72 bytes and its header 16 (nothing more is asked for)."""


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
    """True where the kernel tells a loopback connection's owner: one is made and looked up
    (the first query may load the kernel's ``inet_diag`` module)."""
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            server = listener.getsockname()
            with socket.create_connection(server, timeout=5) as client:
                accepted, _ = listener.accept()
                with accepted:
                    return peer_uid(client.getsockname(), server) == os.geteuid()
    except OSError:
        return False


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the socket at ``client`` connected to ``server``, or ``None``."""
    query = _query(client, server)
    if query is None:
        return None
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
            diag.sendto(query, (0, 0))
            # the kernel answers within the send: an answer not there at once is none
            answer = diag.recv(MAX_ANSWER_BYTES, socket.MSG_DONTWAIT)
    except (OSError, AttributeError):  # no netlink (not Linux), or no answer
        return None
    return _owner(answer, client[1], server[1])


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an address, an IPv4-mapped IPv6 one as IPv4 (as the kernel finds it)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _query(client: tuple[str, int], server: tuple[str, int]) -> bytes | None:
    """The netlink message asking for the one TCP socket from ``client`` to ``server``."""
    local, remote = _address(client[0]), _address(server[0])
    if local is None or remote is None or local.version != remote.version:
        return None
    try:
        ports = struct.pack("!H", int(client[1])), struct.pack("!H", int(server[1]))
    except (struct.error, ValueError):
        return None
    family = socket.AF_INET if local.version == 4 else socket.AF_INET6
    request = _REQUEST.pack(
        family,
        socket.IPPROTO_TCP,
        0,
        ALL_STATES,
        *ports,
        local.packed.ljust(16, b"\0"),
        remote.packed.ljust(16, b"\0"),
        0,
        INET_DIAG_NOCOOKIE,
        INET_DIAG_NOCOOKIE,
    )
    length = _HEADER.size + len(request)
    return _HEADER.pack(length, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + request


def _owner(answer: bytes, client_port: int, server_port: int) -> int | None:
    """The uid in the kernel's ``answer``, when it is about the socket asked for and a
    process still holds that socket (a nonzero inode)."""
    if len(answer) < _HEADER.size + _ANSWER.size:
        return None  # too short for a socket: an error (not found) or nothing
    _length, kind, _flags, _sequence, _port = _HEADER.unpack_from(answer)
    if kind != SOCK_DIAG_BY_FAMILY:
        return None
    fields = _ANSWER.unpack_from(answer, _HEADER.size)
    local_port, remote_port, uid, inode = fields[4], fields[5], fields[13], fields[14]
    if (local_port, remote_port) != (
        struct.pack("!H", int(client_port)),
        struct.pack("!H", int(server_port)),
    ):
        return None
    return uid if inode else None
