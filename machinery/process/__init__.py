"""What every raftkube process needs from its host, written once: files written durably and
privately (`disk`), the cluster's certificates and TLS contexts (`pki`), local processes by
pid file and free ports (`launch`), settings from cluster.toml (`config`), and what every
command shares (`command`: the usage error, the default data dir).

Why here: the store's members, the apiserver, the components and the `raftkube` CLI all
start processes, write files, load cluster.toml and speak TLS with the cluster CA.  These
helpers used to live in the store (store/disk.py, store/pki.py, store/launcher.py,
store/config.py, store/cli/common.py), so the apiserver and the kubelet imported the store's
server and CLI to reach them, against the layering (apiserver -> machinery + store client;
components -> client + machinery).  `machinery` is the one layer below all of them and
imports nothing above it, so the helpers can go nowhere else without a new top-level folder.
They are a subpackage, not beside the API semantics of `machinery` (selectors, quantities,
durations), because they are not Kubernetes semantics: they are the host's (files, processes,
certificates), and a reader looking for what a label selector means should not wade through
fsync.

Each module imports only the standard library, `cryptography` and its siblings here.
"""
