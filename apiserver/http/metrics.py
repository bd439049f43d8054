"""Prometheus metrics of the apiserver's requests (one registry per server, so tests stay apart)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "apiserver_request_total",
            "Requests by verb, resource and code.",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "Request latency by verb and resource.",
            ["verb", "resource"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )

        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, verb: str, resource: str, code: int, seconds: float) -> None:
        key = (verb, resource, code)
        children = self._children.get(key)
        if children is None:  # label lookups are costly; the label sets are few (bounded by the catalog)
            children = self._children[key] = (
                self.requests.labels(verb, resource, str(code)),
                self.latency.labels(verb, resource),
            )
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
