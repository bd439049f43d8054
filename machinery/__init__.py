"""The Kubernetes semantics both the apiserver and the components need, written once.

What lives here is what Kubernetes keeps in k8s.io/apimachinery and k8s.io/component-helpers:
meanings that are part of the API itself rather than of one program.  A label selector has to
select the same pods in `kubectl get -l`, in the ReplicaSet controller and in the scheduler's
spreading; a toleration has to tolerate the same taints in the scheduler and in the node
lifecycle controller's evictions; a CronJob schedule the apiserver accepts must be the one the
controller runs.  When each program carried its own copy they drifted (an unknown selector
operator matched in one and failed in another), so each meaning now has one implementation
here, with upstream's rules where the copies disagreed.

Why a top-level package and not `apiserver/machinery/`: the layers are components -> client
library + machinery, apiserver -> machinery + store client.  Under `apiserver/` the components
would import the apiserver to reach it, which is the layering this package exists to remove.
Why the name `machinery`: it says what Kubernetes calls the same thing (apimachinery) without
claiming the whole of it, and it sits beside the fixed top-level folders (store/, apiserver/,
components/) as the one shared layer below both; it imports nothing of theirs.

Modules, one meaning each:
- `selectors`: label selectors (the `?labelSelector=` grammar, metav1.LabelSelector, node
  selector terms) and field selectors;
- `taints`: whether a toleration tolerates a taint (v1 Toleration.ToleratesTaint);
- `duration`: Go's time.ParseDuration and Duration.String();
- `cron`: CronJob schedules (robfig/cron's standard parser, kube's CronJob grammar) and when
  they fire;
- `clock`: time as an injected dependency, so back-offs, leases and bookmarks are testable;
- `process/`: not API semantics but what every raftkube process needs from its host (durable
  private files, the cluster's PKI, processes by pid file, cluster.toml settings); see its
  docstring for why it lives here.
"""
