"""The [apiserver] section of cluster.toml, and the `--storage` URL.

Values are checked as [store]'s are (machinery.process.config): a wrong type, an
out-of-range port or an unknown key is a ConfigError naming the file and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from apiserver.kubernetes_service import DEFAULT_SERVICE_CIDR, first_address
from apiserver.resource_metrics import INTERVAL_S as METRICS_INTERVAL_S
from apiserver.resource_metrics import parse_resolution
from apiserver.storage import parse_storage_url
from machinery.process.config import ConfigError, load_section


@dataclass(frozen=True, kw_only=True)
class ApiserverSettings:
    """How `raftkube up` runs the apiserver."""

    host: str = "127.0.0.1"
    port: int = field(default=6443, metadata={"max": 65535})
    storage: str = ""
    """A storage URL (`raftkube://host:port,...` or `etcd://host:port,...`); empty: the data dir's store."""
    count: int = field(default=1, metadata={"max": 5})
    """Apiservers to run: more than one is an HA set behind the balancer on host:port
    (components.cli.apiserver_set), each apiserver with its own port and watch cache."""
    startup_timeout: float = 30.0
    """Seconds `raftkube up` gives the apiserver, from its start, to answer /readyz (its store's
    election included)."""
    etcd_compaction_interval: str = "5m0s"
    """How often the storage is compacted (kube's flag of the name; "0": never, as a chaos run
    keeps the whole history for its checks)."""
    metric_resolution: str = f"{METRICS_INTERVAL_S:g}s"
    """How often the kubelets' usage is read for metrics.k8s.io (`kubectl top`, autoscalers):
    metrics-server's flag of the name; a rate needs two readings."""
    service_cluster_ip_range: str = DEFAULT_SERVICE_CIDR
    """The Services' CIDR; its first address is the `default/kubernetes` Service's ClusterIP."""
    # The edge (apiserver.http.connection_limits, apiserver.http.inflight): each is a flag of
    # `raftkube apiserver` of the same name with dashes, which `up` passes on.
    max_requests_inflight: int = 400
    """Reads (and watches while they start) each priority level may run at once; past it, 429."""
    max_mutating_requests_inflight: int = 200
    """Writes each priority level may run at once."""
    max_watches_inflight: int = 2_000
    """Open watches each priority level may hold; one ordinary user at most half of them."""
    inflight_per_user_floor: int = 10
    """The least a user's fair share of a level's seats falls to, however many users are active."""
    request_header_timeout: float = 10.0
    """Seconds from a connection's start (or the previous response) until a request's headers are in."""
    request_body_timeout: float = 60.0
    """Seconds from a request's headers until its body is in."""
    idle_connection_timeout: float = 90.0
    """Seconds a kept-alive connection may wait for its next request."""
    max_connections: int = 10_000
    """Connections open at once; more are closed as they come."""

    def edge_flags(self) -> tuple[str, ...]:
        """These edge settings as `raftkube apiserver` flags."""
        names = (
            "max_requests_inflight",
            "max_mutating_requests_inflight",
            "max_watches_inflight",
            "inflight_per_user_floor",
            "request_header_timeout",
            "request_body_timeout",
            "idle_connection_timeout",
            "max_connections",
        )
        return tuple(part for name in names for part in ("--" + name.replace("_", "-"), str(getattr(self, name))))

    def flags(self) -> tuple[str, ...]:
        """Every setting `up` passes on to `raftkube apiserver` as a flag."""
        return (
            *self.edge_flags(),
            *("--service-cluster-ip-range", self.service_cluster_ip_range),
            *("--etcd-compaction-interval", self.etcd_compaction_interval),
            *("--metric-resolution", self.metric_resolution),
        )


def load_apiserver_settings(path: Path) -> ApiserverSettings:
    """The [apiserver] section of `path`, with defaults for what it leaves out."""
    values = load_section(ApiserverSettings, path, "apiserver")
    if "storage" in values:
        try:
            parse_storage_url(values["storage"])
        except ValueError as e:
            raise ConfigError(f"{path}: apiserver.storage: {e}") from None
    if "service_cluster_ip_range" in values:
        try:
            first_address(values["service_cluster_ip_range"])
        except ValueError as e:
            raise ConfigError(f"{path}: apiserver.service_cluster_ip_range: {e}") from None
    if "metric_resolution" in values:
        try:
            parse_resolution(values["metric_resolution"])
        except ValueError as e:
            raise ConfigError(f"{path}: apiserver.metric_resolution: {e}") from None
    return ApiserverSettings(**values)
