"""Where a webhook may be sent (spec 19 §19.6): the target policy against SSRF.

A target URL is ``http`` or ``https`` with a host. Every address its host resolves to must
be a public one — not private, loopback, link-local (the cloud metadata address
169.254.169.254 among them), shared, reserved, multicast or unspecified — unless the
settings allow it: ``THREADLOOM_WEBHOOK_ALLOW_PRIVATE=1`` allows every address,
``THREADLOOM_WEBHOOK_ALLOW`` a comma-separated list of host names and networks
(``hooks.internal,10.1.0.0/16``). The check runs when a subscription is made or changed
(``check_url``) and again at each connection (``PinnedBackend``): the connection goes to the
very address that was checked, so a name that resolves elsewhere the second time (DNS
rebinding) cannot reach a refused address. ``httpcore`` (the connection layer of ``httpx``)
makes the connection; TLS still verifies the URL's host name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore

from threadloom.errors import InvalidField

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TargetRefused(InvalidField):
    """A webhook target the policy refuses (over HTTP a 400)."""

    def __init__(self, problem: str) -> None:
        super().__init__("url", problem, f"url {problem}")


class Unresolved(TargetRefused):
    """The target's host name does not resolve now (DNS answered no address, or failed)."""


@dataclass(frozen=True)
class TargetPolicy:
    """Which addresses a webhook may reach."""

    allow_private: bool = False
    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[Network, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TargetPolicy:
        env = os.environ if env is None else env
        flag = env.get("THREADLOOM_WEBHOOK_ALLOW_PRIVATE", "").strip().lower()
        hosts: set[str] = set()
        networks: list[Network] = []
        for item in env.get("THREADLOOM_WEBHOOK_ALLOW", "").split(","):
            item = item.strip().lower()
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.rstrip("."))
        return cls(flag in ("1", "true", "yes", "on"), frozenset(hosts), tuple(networks))

    def address_allowed(self, host: str, address: Address) -> bool:
        if self.allow_private or host.lower().rstrip(".") in self.allow_hosts:
            return True
        if any(address in net for net in self.allow_networks):
            return True
        return is_public(address)

    def check_addresses(self, host: str, addresses: Iterable[Address]) -> list[Address]:
        """The addresses of ``host``, each allowed (else ``TargetRefused``)."""
        found = list(addresses)
        if not found:
            raise TargetRefused(f"host {host!r} does not resolve")
        for address in found:
            if not self.address_allowed(host, address):
                raise TargetRefused(
                    f"resolves to {address}, a non-public address the settings do not allow"
                    " (THREADLOOM_WEBHOOK_ALLOW_PRIVATE, THREADLOOM_WEBHOOK_ALLOW)"
                )
        return found


def is_public(address: Address) -> bool:
    """Whether ``address`` is a global unicast address (an IPv4-mapped IPv6 address is
    judged as its IPv4 address)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def split_url(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a target URL (else ``TargetRefused``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise TargetRefused("must be an http or https URL")
    host = parts.hostname
    if not host:
        raise TargetRefused("has no host")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("may not carry credentials")
    return scheme, host, port or (443 if scheme == "https" else 80)


async def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to (a literal address: itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:  # the IDNA codec refuses the name (an empty or long label)
        raise TargetRefused(f"host {host!r} is not a valid host name: {exc}") from None
    except OSError as exc:
        raise Unresolved(f"host {host!r} does not resolve: {exc}") from None
    out: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in out:
            out.append(address)
    return out


async def check_url(url: str, policy: TargetPolicy) -> None:
    """Refuse (``TargetRefused``) a target URL the policy does not allow, resolving it now
    (the check at subscribe time). A name that does not resolve now is not refused: DNS
    may be down or not yet set up, and every connection checks again (spec 19 §19.6)."""
    _, host, port = split_url(url)
    try:
        addresses = await resolve(host, port)
    except Unresolved:
        return
    policy.check_addresses(host, addresses)


@dataclass
class PinnedBackend(httpcore.AsyncNetworkBackend):
    """The network backend of the delivery's connection pool: resolves the host, checks
    every address against the policy, and connects to a checked one (spec 19 §19.6)."""

    policy: TargetPolicy
    inner: httpcore.AsyncNetworkBackend = field(default_factory=httpcore.AnyIOBackend)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self.policy.check_addresses(host, await resolve(host, port))
        error: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused("may not be a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)
