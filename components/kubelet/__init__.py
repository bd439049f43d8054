"""The kubelet (issue 12), built from the pure parts up.

Each part takes time and observations as arguments, as the Raft core does, so it is tested
in-process; the process around them (Node registration, Lease renewal, the pod workers and
the runtimes) comes on top:

  backoff    the crash back-off of a restarting container (10 s doubling to 5 min, forgotten
             after 10 min without a crash)
  podphase   a pod's phase and its Initialized / ContainersReady / Ready conditions from the
             statuses of its containers, as kube's kubelet computes them
  probes     one probe's verdict over time: initial delay, period, success and failure
             thresholds, and what each kind (startup, liveness, readiness) reports before
             its first result
  envvars    a container's environment: envFrom, env with $(VAR) expansion, fieldRef,
             resourceFieldRef, ConfigMap and Secret keys, optional sources
  volumes    the files of configMap, secret, downwardAPI and projected volumes, and their
             atomic writing (a `..data` symlink switched in one rename)
  nodestatus the Node it registers (labels, capacity, allocatable, addresses, nodeInfo),
             its conditions in kube's words, and when a status is worth posting
  podactions what a pod worker does next (kube's computePodActions): init containers in
             order, sidecars, restarts by policy and back-off, probe kills, deletion
  containerlog  a container's log in the CRI format, rotated by size, read back for
             `kubectl logs` (--since-time, --tail)
  shim, process_runtime  the `process` runtime: each container a local process kept by a
             shim that logs its output and records its exit, so a restarted kubelet adopts it
"""
