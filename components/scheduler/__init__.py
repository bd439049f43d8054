"""`raftkube scheduler`: kube-scheduler's semantics, as a separate process speaking only to the apiserver.

The contract, after kube-scheduler:
* Only pods with `spec.schedulerName` "default-scheduler" and no `spec.nodeName` are scheduled.
* One scheduling cycle at a time, on a snapshot of the cache (`cache.py`): filters decide which
  nodes can take the pod, scores rank them (`plugins/`, one module a plugin, and `framework.py`: pure, no I/O).
* The chosen node is *assumed* in the cache at once (so the next cycle already counts the pod),
  then the binding is POSTed in the background; a failed binding forgets the assumption and the
  pod goes back to the queue.  The informer's copy of the bound pod confirms the assumption.
* A pod no node can take gets a `FailedScheduling` event worded as kube-scheduler words it, may
  preempt lower-priority pods (`preemption.py`), and waits in the unschedulable queue until a
  cluster event may help (node added/updated, pod deleted), at the latest five minutes
  (`queue.py`); failed attempts back off per pod, 1 s doubling to 10 s.

The pure core (`resources`, `nodeinfo`, `plugins`, `framework`, `preemption`, `queue`, `cache`)
never imports asyncio and never reads a clock: time comes in as arguments.
"""
