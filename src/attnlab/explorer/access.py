"""Who may use the explorer: the ``Host`` names it answers to and the token its API asks for.

**Host allow-list** (every request, the page included). A web page of another site can make a
browser send requests to ``127.0.0.1`` by *DNS rebinding*: its own name, say
``evil.example.com``, is made to resolve to the loopback address, so the browser treats the
explorer as that site and lets its script read the answers. The browser still sends ``Host:
evil.example.com``; the explorer answers only to the loopback names ``127.0.0.1``,
``localhost`` and ``[::1]``, the ``--host`` it listens on and the names of ``--allow-host``
(any port), and refuses anything else with 400. Listening on every address (``--host
0.0.0.0`` or ``::``), it also answers to any IP address: a rebinding page always sends a name.

**Token** (the JSON API, ``/api/...``; opt-in with ``attnlab serve --token``, required beyond
loopback). Every API request must carry ``Authorization: Bearer TOKEN``, compared in constant
time (:func:`hmac.compare_digest`); otherwise 401. The page and its files are the package's own
and hold no data, so they are served without it: the URL ``attnlab serve`` prints,
``http://HOST:PORT/?token=TOKEN``, opens the page, which keeps the token for its tab
(``sessionStorage``), removes it from the address bar and sends it with every API request.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def host_name(host: str) -> str:
    """The name of a ``Host`` header or an address, lowercased, without its port; an IPv6
    address in brackets (``[::1]:8000`` and ``::1`` → ``[::1]``)."""
    host = host.strip().lower()
    if host.startswith("["):
        address, bracket, _ = host.partition("]")
        return address + bracket
    if host.count(":") > 1:  # a bare IPv6 address (from --host)
        return f"[{host}]"
    return host.partition(":")[0]


def is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Access:
    """The ``hosts`` a server answers to (names from :func:`host_name`), whether it also answers
    to ``any_ip`` address (it listens on all of them), and the API's bearer ``token`` (``None``:
    none asked)."""

    hosts: frozenset[str] = frozenset(LOOPBACK_NAMES)
    any_ip: bool = False
    token: str | None = None

    @classmethod
    def of(cls, host: str, allow: Iterable[str] = (), token: str | None = None) -> Access:
        """The access of a server listening on ``host`` (as ``--host`` gave it), answering also
        to the names ``allow`` (``--allow-host``)."""
        wildcard = is_ip_address(host) and ipaddress.ip_address(host.strip("[]")).is_unspecified
        names = {*LOOPBACK_NAMES, *(host_name(name) for name in allow)}
        if not wildcard:
            names.add(host_name(host))
        return cls(frozenset(names), any_ip=wildcard, token=token)

    def host_allowed(self, host: str) -> bool:
        name = host_name(host)
        return name in self.hosts or (self.any_ip and is_ip_address(name))

    def authorized(self, authorization: bytes) -> bool:
        """Whether an ``Authorization`` header (raw bytes) carries the token."""
        if self.token is None:
            return True
        expected = b"Bearer " + self.token.encode("utf-8")
        return hmac.compare_digest(authorization, expected)


ASGIApp = Callable[[dict[str, Any], Callable, Callable], Awaitable[None]]


class Guard:
    """ASGI middleware: refuse, before any route runs, a request whose ``Host`` is not allowed
    (400) or an API request without the token (401); one line of JSON each."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        refusal = self.refusal(scope) if scope["type"] == "http" else None
        if refusal is None:
            return await self.app(scope, receive, send)
        await refusal(scope, receive, send)

    def refusal(self, scope: dict[str, Any]) -> JSONResponse | None:
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.access.host_allowed(host):
            shown, name = (repr(host[:80]), host_name(host[:80])) if host else ("no Host header", "")
            hint = f"; start attnlab serve with --allow-host {name} to allow it" if name else ""
            message = f"this explorer does not answer to {shown} (DNS rebinding?){hint}"
            return JSONResponse({"error": message}, status_code=400)
        given = headers.get(b"authorization", b"")
        if scope["path"].startswith("/api/") and not self.access.authorized(given):
            message = ("this explorer's API needs its token: open the address attnlab serve printed "
                       "(…/?token=…), or send Authorization: Bearer TOKEN")
            return JSONResponse({"error": message}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        return None
