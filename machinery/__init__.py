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
- `quantity`: resource quantities (`500m`, `1.5Gi`) parsed, compared, summed and printed as
  apimachinery's resource.Quantity does, so quota admission, the quota controller, the kubelet
  and the scheduler agree on what a request is worth;
- `objects`: the `Obj` type (an API object as decoded JSON) and the tolerant readers of its
  fields and metadata (name, namespace, labels, owner references, ...);
- `qos`: a pod's QoS class, which the apiserver writes and the kubelet reports;
- `pods`: whether a pod is ready or terminating (podutil.IsPodReady), as evictions, budgets,
  workloads and endpoints count it;
- `disruption`: which PodDisruptionBudgets guard a pod, for evictions and the disruption
  controller alike;
- `pod_log_options`: `pods/log` query options, as the apiserver checks them and the kubelet
  serves them;
- `podresources`: a pod's effective requests and limits (resource.PodRequests, PodLimits), for the
  scheduler, quota and LimitRange alike;
- `quota`: what a ResourceQuota counts (each object's usage, scopes), for admission's charges
  and the quota controller's recount alike;
- `resources`: the built-in resources by group and plural (version, kind, scope), for
  components that must name kinds without importing the apiserver's catalog;
- `timestamps`: metav1.Time, written to the second in UTC and read back tolerantly;
- `host_ports`: which host ports a pod asks for and when two collide, for the scheduler's
  NodePorts filter and the kubelet's admission;
- `local_volumes`: the built-in local provisioner's names, shared by the persistentvolume
  controller and the kubelets;
- `process/`: not API semantics but what every raftkube process needs from its host (durable
  private files, the cluster's PKI, processes by pid file, cluster.toml settings); see its
  docstring for why it lives here.
"""
