"""The upstream peers, built from Go modules: `raftkube peers build` and `raftkube peers status`.

kube-apiserver, kube-controller-manager, kube-scheduler, e2e.test, ginkgo, agnhost, nonewprivs,
sample-apiserver, etcd and etcdctl 3.6, etcd's load tool etcd-benchmark (and upstream busybox,
from its C source) are yardsticks for tests, conformance and benchmarks, never runtime
dependencies: they are built on demand with the machine's `go` through the Go module proxy
into the cache that machinery.process.peers names, and nothing of their source is in this
repository.
The CLI imports this package only when a `peers` command runs (components.cli.peers).
"""
