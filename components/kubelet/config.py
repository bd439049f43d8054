"""The [kubelets] section of cluster.toml: how many local nodes `raftkube up` runs, their size
and their pod network.

Checked as [apiserver] is: a wrong type, an out-of-range count or an unknown key is a
ConfigError naming the file and key.  Nodes are named node-1 .. node-<count>; with
`pod_network = "netns"` node-<i> gives its pods addresses of 10.244.<i>.0/24.
`[[kubelets.images]]` entries extend the kubelets' image table (images.py); `up` hands them
to each kubelet as JSON (--images), so a kubelet needs no cluster.toml either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from components.kubelet.images import TABLE_KEY, ImageEntry, parse_entries, unparse
from machinery.process.config import ConfigError, load_section, read_toml

MAX_KUBELETS = 10
MAX_HOLLOW = 5000
HOLLOW_LABEL = "raftkube.io/hollow"
"""On every hollow Node (components.kubelet.hollow): select them, or keep real pods off them.
Here, not in hollow.py, so that `raftkube status` can tell them apart without importing a kubelet."""
POD_NETWORKS = ("auto", "host", "netns")


@dataclass(frozen=True, kw_only=True)
class KubeletSettings:
    count: int = field(default=2, metadata={"min": 0, "max": MAX_KUBELETS})
    """Kubelets `raftkube up` starts (node-1 .. node-<count>); 0: none."""
    capacity: str = "cpu=4,memory=8Gi,pods=110"
    """Each node's capacity, name=quantity pairs."""
    system_reserved: str = field(default="", metadata={"empty": True})
    """Capacity kept from pods on each node."""
    hollow: int = field(default=0, metadata={"min": 0, "max": MAX_HOLLOW})
    """Hollow nodes (hollow-1 .. hollow-<n>, fake containers) in one `raftkube hollow-nodes` process."""
    pod_network: str = "auto"
    """host: pods share the node's network; netns: each pod a namespace and IP of its own (root);
    auto: netns where it can be had (components/cli/cluster_network.py), else host."""
    images: tuple[ImageEntry, ...] = ()
    """Image table entries ([[kubelets.images]]), matched before the shipped ones."""

    def nodes(self) -> tuple[str, ...]:
        return tuple(f"node-{i}" for i in range(1, self.count + 1))

    def network_args(self, node: str) -> tuple[str, ...]:
        """The pod network flags of a kubelet `up` runs (node-<i>: pod CIDR 10.244.<i>.0/24)."""
        if self.pod_network != "netns":
            return ()
        index = int(node.removeprefix("node-"))
        return ("--pod-network", self.pod_network, "--pod-cidr", f"10.244.{index}.0/24")

    def image_args(self) -> tuple[str, ...]:
        """The --images flag of a kubelet `up` runs (none when cluster.toml adds no entry)."""
        return ("--images", json.dumps(unparse(self.images))) if self.images else ()


def load_kubelet_settings(path: Path) -> KubeletSettings:
    """The [kubelets] section of `path`, with defaults for what it leaves out (all of them
    when there is no such file: kubelets need no cluster.toml)."""
    values = load_section(KubeletSettings, path, "kubelets", tables=("images",), missing_file_ok=True)
    if path.exists():
        raw = read_toml(path).get("kubelets", {}).get("images")
        if raw is not None:
            try:
                values["images"] = parse_entries(raw, f"{path}: {TABLE_KEY}")
            except ValueError as e:
                raise ConfigError(str(e)) from None
    network = values.get("pod_network", "auto")
    if network not in POD_NETWORKS:
        raise ConfigError(f"{path}: kubelets.pod_network must be auto, host or netns, got {network!r}")
    return KubeletSettings(**values)
