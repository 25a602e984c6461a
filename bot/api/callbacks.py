"""Where webhooks may go: the admin's ``api.callback_hosts`` allow-list, and no SSRF.

A callback URL must be ``http(s)://host[:port]/…`` without credentials, and its host
must be on the allow-list: a name (any port), ``name:port``, an IP address, or a CIDR
range. Then every address the host resolves to must be public — private, loopback,
link-local, shared, reserved and multicast addresses are refused unless an entry
lists that address or a range containing it. Cloud metadata addresses are refused
unless listed exactly (a broad range never opens them). The check runs when the
request is created and again, after a fresh DNS lookup, right before every delivery;
the delivery then connects to the address that was checked (no second lookup an
attacker could rebind).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200"))
MAX_URL_CHARS = 2000


class CallbackRefused(ValueError):
    """The URL may not receive webhooks; the message says why."""


@dataclass(frozen=True)
class Target:
    """A checked destination: connect to ``address``:``port``, speak to ``host``."""

    url: SplitResult
    host: str
    port: int
    address: IPAddress

    def pinned_url(self) -> str:
        """The URL with the host replaced by the checked address."""
        literal = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        netloc = f"{literal}:{self.port}"
        return self.url._replace(netloc=netloc).geturl()

    @property
    def host_header(self) -> str:
        default = 443 if self.url.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class CallbackPolicy:
    """The allow-list, parsed once from ``api.callback_hosts``."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.any_port: set[str] = set()
        self.host_ports: set[tuple[str, int]] = set()
        self.networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower()
            if "/" in entry:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            address = _as_address(entry.strip("[]"))
            if address is not None:
                self.networks.append(ipaddress.ip_network(address))
                continue
            host, port = _split_host_port(entry)
            if port is None:
                self.any_port.add(host)
            else:
                self.host_ports.add((host, port))

    # ------------------------------------------------------------------ checks

    def check_url(self, url: str) -> tuple[SplitResult, str, int]:
        """Static checks (scheme, credentials, allow-list); returns (parts, host, port)."""
        if len(url) > MAX_URL_CHARS:
            raise CallbackRefused(f"callback_url is longer than {MAX_URL_CHARS} characters")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise CallbackRefused("callback_url is not a valid URL") from None
        if parts.scheme not in ("http", "https"):
            raise CallbackRefused("callback_url must start with https:// or http://")
        if parts.username is not None or parts.password is not None:
            raise CallbackRefused("callback_url must not contain credentials")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise CallbackRefused("callback_url has no host")
        port = port or (443 if parts.scheme == "https" else 80)
        if not self._host_allowed(host, port):
            raise CallbackRefused(
                f"callback host '{host}' is not on the allow-list (api.callback_hosts); "
                "ask an admin to add it")
        return parts, host, port

    def _host_allowed(self, host: str, port: int) -> bool:
        address = _as_address(host)
        if address is not None:
            return any(address in network for network in self.networks)
        host = host.lower()
        return host in self.any_port or (host, port) in self.host_ports

    def address_allowed(self, address: IPAddress) -> bool:
        """Public addresses pass; others only if listed (metadata: listed exactly)."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address in METADATA_ADDRESSES:
            return any(n.num_addresses == 1 and address in n for n in self.networks)
        public = address.is_global and not (address.is_multicast or address.is_reserved
                                             or address.is_unspecified)
        return public or any(address in network for network in self.networks)

    async def resolve(self, url: str) -> Target:
        """Check ``url`` statically, resolve its host now and check every address."""
        parts, host, port = self.check_url(url)
        literal = _as_address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise CallbackRefused(f"callback host '{host}' does not resolve "
                                      f"({exc.strerror or exc})") from None
            addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0])
                                           for info in infos))
        if not addresses:
            raise CallbackRefused(f"callback host '{host}' has no address")
        refused = [a for a in addresses if not self.address_allowed(a)]
        if refused:
            raise CallbackRefused(
                f"callback host '{host}' resolves to a private, loopback, link-local or "
                f"metadata address ({refused[0]}); list that address or its range in "
                "api.callback_hosts if it is really meant")
        return Target(parts, host, port, addresses[0])


def _as_address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _split_host_port(entry: str) -> tuple[str, int | None]:
    host, sep, port = entry.rpartition(":")
    if sep and port.isdigit():
        return host.rstrip("."), int(port)
    return entry.rstrip("."), None
