"""Objects as the apiserver returns them, and private network namespaces to try rules in."""

from __future__ import annotations

import ipaddress
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from components.proxy.rules import Node

NODE = Node("node-a", (ipaddress.IPv4Address("10.244.1.1"),), ipaddress.IPv4Network("10.244.0.0/16"))


def service(
    name: str, cluster_ip: str | None, *ports: dict[str, Any], ns: str = "default", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": list(ports) or [{"name": "http", "port": 80, "protocol": "TCP"}], **spec}
    if cluster_ip is not None:
        body["clusterIP"] = cluster_ip
    return {"metadata": {"namespace": ns, "name": name}, "spec": body}


def endpoint(ip: str, node: str | None = "node-a", ready: bool = True, **cond: bool) -> dict[str, Any]:
    e: dict[str, Any] = {"addresses": [ip], "conditions": {"ready": ready, **cond}}
    if node is not None:
        e["nodeName"] = node
    return e


def slice_(
    service_name: str,
    *endpoints: dict[str, Any],
    port: int = 8080,
    port_name: str = "http",
    ns: str = "default",
    name: str = "",
) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": ns,
            "name": name or f"{service_name}-abc",
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": list(endpoints),
    }


def sh(*argv: str, timeout: float = 10.0, check: bool = True, input: str | None = None) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=input, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: status {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@contextmanager
def netns(tag: str = "") -> Iterator[str]:
    """A fresh network namespace `rkpx-<random>`, deleted by name afterwards whatever happens."""
    name = f"rkpx-{tag}{secrets.token_hex(4)}"
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10, check=False)


def in_ns(ns: str) -> tuple[str, ...]:
    return ("ip", "netns", "exec", ns)
