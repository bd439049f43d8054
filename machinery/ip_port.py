"""`IP:PORT` as flags give it (`--listen 0.0.0.0:53`, `--upstream [fd00::1]:53`), checked once for
every component that takes one (the DNS server, the apiserver balancer)."""

from __future__ import annotations

import ipaddress


def ip_port(text: str, flag: str, default_port: int | None = None) -> tuple[str, int]:
    """(ip, port) of `IP:PORT`, `[V6]:PORT`, or (with a default port) a bare IP; ValueError
    naming the flag."""
    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{flag} {text}: not an IP address") from None
    if not port_text:
        if default_port is None:
            raise ValueError(f"{flag} {text}: no port (IP:PORT)")
        return host, default_port
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise ValueError(f"{flag} {text}: {port_text!r} is not a port")
    return host, int(port_text)
