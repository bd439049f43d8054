"""How a kubeconfig names the apiservers of an HA set: written by apiserver.pki (`raftkube up`),
read by components.client.kubeconfig, one name for both.

    clusters[].cluster.extensions: [{name: raftkube.io/apiservers, extension: {servers: [URL, ...]}}]

kubectl keeps unknown extensions and ignores them (it dials `server`, the balancer); our client
library dials the servers listed, failing over among them.
"""

from __future__ import annotations

SERVERS_EXTENSION = "raftkube.io/apiservers"
MAX_SERVERS = 16
"""More apiservers than any HA control plane runs (a longer list is refused as damaged)."""
