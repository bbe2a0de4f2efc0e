"""The guard every HTTP listener of jarvis sits behind (plain ASGI, before any route runs).

Three checks, each answered with a JSON error naming the flag that would allow it:

* **Host** (DNS rebinding): a web page whose name was made to point at ``127.0.0.1``
  reaches a loopback server with *its own* name in ``Host``, and the browser treats the
  answer as same-origin. Only the server's own names are served: the bound address,
  ``localhost``, ``127.0.0.1`` and ``[::1]``, each with the listening port, and the names
  given with ``--allowed-host`` (any port). Anything else is refused with 421.
* **Origin** (cross-site requests): a page of another site may send a ``POST`` (a form, or
  ``fetch`` in ``no-cors`` mode: no preflight) even when it cannot read the answer; that is
  enough to create, change or run an agent. On ``POST``, ``PUT``, ``PATCH`` and ``DELETE`` an
  ``Origin`` must be one of the server's own (same-origin of an allowed host) or one given
  with ``--allowed-origin``/``--cors-origin``; ``Origin: null`` and a browser's
  ``Sec-Fetch-Site: cross-site`` without an ``Origin`` are refused too (403). Programs
  (curl, SDKs) send no ``Origin`` and are not affected.
* **Local user** (peer credentials): every local user can connect to a loopback port. With
  ``owner_only`` (a server without an API key) a request is served only when the client's
  socket belongs to the server's own uid or to a uid given with ``--allow-user``
  (:mod:`.peer_user`: the kernel is asked about the client's one socket; on a Unix socket,
  ``SO_PEERCRED``, read by the server's protocol); when the owner cannot be told (no socket
  diagnostics, a socket its client already closed, another kind of connection) the request
  is refused and the answer says to use an API key (403).

The listener's own address comes from ``scope["server"]``, so one guard object serves
whatever port the server was given. The owner of a connection is looked up once per
connection where the server provides a per-connection cell (``jarvis serve``'s protocol,
:data:`PEER_CELL`), else once per request.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from jarvis.entrypoints.http import peer_user
from jarvis.entrypoints.http.errors import ApiError
from jarvis.entrypoints.http.peer_user import PeerCell
from jarvis.entrypoints.http.security import App, Receive, Scope, Send, refuse

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PEER_CELL = "jarvis.peer"
"""Key, in ``scope["state"]``, of a per-connection :class:`PeerCell` the server's protocol
may provide."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerPolicy:
    """Who a listener serves. The defaults: its own names, same-origin, any local user."""

    allowed_hosts: frozenset[str] = frozenset()
    """Extra host names (lowercase, no port) accepted in ``Host`` and ``Origin``."""
    allowed_origins: frozenset[str] = frozenset()
    """Extra origins (``scheme://host[:port]``, lowercase) accepted on state changes."""
    owner_only: bool = False
    """Serve only connections of ``owner_uid`` and ``allowed_uids`` (no API key)."""
    owner_uid: int = field(default_factory=os.geteuid)
    allowed_uids: frozenset[int] = frozenset()

    @classmethod
    def of(
        cls,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        owner_only: bool = False,
        allowed_uids: Iterable[int] = (),
    ) -> ListenerPolicy:
        return cls(
            allowed_hosts=frozenset(_name_of(h) for h in allowed_hosts if h.strip()),
            allowed_origins=frozenset(
                o.strip().rstrip("/").lower() for o in allowed_origins if o.strip()
            ),
            owner_only=owner_only,
            allowed_uids=frozenset(allowed_uids),
        )


def listener_policy(
    given: ListenerPolicy | None, *, api_key: str | None, cors: Iterable[str] = ()
) -> ListenerPolicy:
    """``given`` (default: the server's own names), serving only its own user when there
    is no API key, and taking the CORS origins as allowed origins."""
    policy = given or ListenerPolicy()
    extra = {o.strip().rstrip("/").lower() for o in cors if o.strip()}
    return replace(
        policy,
        owner_only=policy.owner_only or not api_key,
        allowed_origins=policy.allowed_origins | extra,
    )


def _name_of(host: str) -> str:
    """``NAME`` or ``NAME:PORT`` as the lowercase name (an allowed name takes any port)."""
    split = _split_host(host)
    return split[0] if split is not None else host.strip().lower()


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value)
    return None


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (IPv6 in brackets) as (lowercase host, port), or None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[: end + 1], value[end + 1 :]
    else:
        host, _, port_text = value.partition(":")
        rest = ":" + port_text if port_text or value.endswith(":") else ""
    if not rest:
        return host, None
    if not rest.startswith(":") or not rest[1:].isdigit() or len(rest) > 6:
        return None
    return host, int(rest[1:])


class ListenerGuard:
    """Wraps a listener's application: Host, then Origin, then the connecting user."""

    def __init__(self, app: App, policy: ListenerPolicy | None = None) -> None:
        self.app = app
        self.policy = policy or ListenerPolicy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self.problem(scope)
        if error is not None:
            await refuse(scope, send, error)
            return
        await self.app(scope, receive, send)

    def problem(self, scope: Scope) -> ApiError | None:
        """Why this request must not reach the application, or None."""
        server = scope.get("server")
        port = int(server[1]) if server and server[1] is not None else None
        bound = str(server[0]).lower() if server else ""
        host = _header(scope, b"host")
        if host is not None and not self._own(host.decode("latin-1"), bound, port, 80):
            return ApiError(
                421,
                "This server does not answer to that Host name (a page of another site may "
                "have pointed its name at this machine). Use "
                f"http://127.0.0.1:{port or 'PORT'}/, or allow the name with "
                "jarvis serve --allowed-host NAME.",
                "invalid_request_error",
                "host_not_allowed",
            )
        if str(scope.get("method", "GET")).upper() in STATE_CHANGING:
            error = self._origin_problem(scope, bound, port)
            if error is not None:
                return error
        if self.policy.owner_only:
            return self._peer_problem(scope)
        return None

    def _own(self, value: str, bound: str, port: int | None, default_port: int) -> bool:
        split = _split_host(value)
        if split is None:
            return False
        name, given = split
        if name in self.policy.allowed_hosts:
            return True
        own = name in LOOPBACK_NAMES or name == bound or f"[{bound}]" == name
        if port is None:  # a Unix socket: no port to compare (a browser cannot reach it)
            return name in LOOPBACK_NAMES
        return own and (given if given is not None else default_port) == port

    def _origin_problem(self, scope: Scope, bound: str, port: int | None) -> ApiError | None:
        origin = _header(scope, b"origin")
        if origin is None:
            site = _header(scope, b"sec-fetch-site")
            if site is not None and site.strip().lower() == b"cross-site":
                return _cross_site("a page of another site")
            return None
        text = origin.decode("latin-1").strip().rstrip("/").lower()
        if text in self.policy.allowed_origins:
            return None
        parts = urlsplit(text)
        if parts.scheme in ("http", "https") and not parts.path and parts.netloc:
            default = 443 if parts.scheme == "https" else 80
            if self._own(parts.netloc, bound, port, default):
                return None
        return _cross_site(repr(text[:200]))

    def _peer_problem(self, scope: Scope) -> ApiError | None:
        uid = self._peer_uid(scope)
        policy = self.policy
        if uid is not None and (uid == policy.owner_uid or uid in policy.allowed_uids):
            return None
        who = "could not be told" if uid is None else f"is uid {uid}"
        return ApiError(
            403,
            f"This server serves only its own user (uid {policy.owner_uid}) without an API "
            f"key, and the connecting user {who}. Start it with an API key "
            "(JARVIS_API_KEY, OPENJARVIS_API_KEY or --api-key-file FILE) or allow that user with "
            "jarvis serve --allow-user NAME.",
            "permission_error",
            "user_not_allowed",
        )

    @staticmethod
    def _peer_uid(scope: Scope) -> int | None:
        state = scope.get("state")
        cell = state.get(PEER_CELL) if isinstance(state, dict) else None
        if isinstance(cell, PeerCell) and cell.known:
            return cell.uid
        client, server = scope.get("client"), scope.get("server")
        uid = None
        if client and server and server[1] is not None:
            uid = peer_user.peer_uid(
                (str(client[0]), int(client[1])), (str(server[0]), int(server[1]))
            )
        if isinstance(cell, PeerCell):
            cell.known, cell.uid = True, uid
        return uid


def _cross_site(who: str) -> ApiError:
    return ApiError(
        403,
        f"Requests that change something are not taken from {who} (a cross-site request). "
        "Allow an origin with jarvis serve --allowed-origin ORIGIN.",
        "permission_error",
        "origin_not_allowed",
    )
