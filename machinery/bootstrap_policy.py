"""The roles and bindings every cluster starts with, as Kubernetes ships them (our own list:
the rules cover the resources this apiserver serves), and how an existing one is reconciled.

cluster-admin is bound to system:masters; admin, edit and view are aggregated ClusterRoles
whose rules come from the `system:aggregate-to-*` roles (so a user's role labelled
`rbac.authorization.k8s.io/aggregate-to-view: "true"` extends view, as in Kubernetes);
every authenticated user may discover the API and review its own access; each component has
its own role bound to the user name `raftkube up` gives it.  A role or binding that exists is
extended with what it misses, never narrowed, unless it is annotated
`rbac.authorization.kubernetes.io/autoupdate: "false"` (then it is left alone).

They live here, not in the apiserver, because two parts write them: our apiserver at its
start (apiserver/authz/bootstrap_policy.py) and `raftkube up --apiserver upstream`, which
grants our components' roles on kube-apiserver (components/cli/upstream_up.py).
"""

from __future__ import annotations

from machinery.objects import Obj

RBAC = "rbac.authorization.k8s.io"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    out: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        out["resourceNames"] = names
    return out


def url_rule(verbs: list[str], urls: list[str]) -> Obj:
    return {"verbs": verbs, "nonResourceURLs": urls}


def _meta(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **(labels or {})},
        "annotations": {AUTOUPDATE: "true"},
    }


def cluster_role(name: str, rules: list[Obj], labels: dict[str, str] | None = None, aggregate: str = "") -> Obj:
    role: Obj = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(name, labels), "rules": rules}
    if aggregate:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {f"{RBAC}/aggregate-to-{aggregate}": "true"}}]
        }
        role["rules"] = []
    return role


def binding(name: str, role: str, subjects: list[tuple[str, str]]) -> Obj:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(name),
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": kind, "name": who} for kind, who in subjects],
    }


_WORKLOADS_CORE = ["pods", "replicationcontrollers", "replicationcontrollers/scale", "persistentvolumeclaims"]
_CONFIG_CORE = ["configmaps", "endpoints", "services", "services/proxy", "serviceaccounts"]
_APPS = [
    "deployments",
    "deployments/scale",
    "replicasets",
    "replicasets/scale",
    "statefulsets",
    "statefulsets/scale",
    "daemonsets",
]
_VIEW_ONLY = [
    (
        "",
        [
            "pods/log",
            "pods/status",
            "services/status",
            "resourcequotas",
            "resourcequotas/status",
            "limitranges",
            "events",
            "namespaces",
            "namespaces/status",
            "bindings",
            "replicationcontrollers/status",
            "persistentvolumeclaims/status",
        ],
    ),
    ("apps", ["deployments/status", "replicasets/status", "statefulsets/status", "daemonsets/status"]),
    ("apps", ["controllerrevisions"]),
    ("batch", ["jobs/status", "cronjobs/status"]),
    ("policy", ["poddisruptionbudgets/status"]),
    ("networking.k8s.io", ["ingresses/status"]),
    ("autoscaling", ["horizontalpodautoscalers/status"]),
    ("discovery.k8s.io", ["endpointslices"]),
    ("events.k8s.io", ["events"]),
]
_EDITABLE = [
    ("", [*_WORKLOADS_CORE, *_CONFIG_CORE]),
    ("apps", _APPS),
    ("batch", ["jobs", "cronjobs"]),
    ("policy", ["poddisruptionbudgets"]),
    ("networking.k8s.io", ["ingresses", "networkpolicies"]),
    ("autoscaling", ["horizontalpodautoscalers"]),
    ("coordination.k8s.io", ["leases"]),
]


def _aggregate_roles() -> list[Obj]:
    view = [rule(READ, [g], r) for g, r in (*_EDITABLE, *_VIEW_ONLY)]
    edit = [rule(WRITE, [g], r) for g, r in _EDITABLE] + [
        rule([*READ, *WRITE], [""], ["secrets"]),
        rule(["create"], [""], ["pods/eviction", "pods/exec", "pods/attach", "pods/portforward", "pods/proxy"]),
        rule(["get"], [""], ["pods/exec", "pods/attach", "pods/portforward", "pods/proxy"]),
        rule(["impersonate"], [""], ["serviceaccounts"]),
        rule(["create"], [""], ["serviceaccounts/token"]),
    ]
    admin = [
        rule([*READ, *WRITE], [RBAC], ["roles", "rolebindings"]),
        rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    ]
    agg = f"{RBAC}/aggregate-to-"
    return [
        cluster_role("admin", [], aggregate="admin"),
        cluster_role("edit", [], {f"{agg}admin": "true"}, aggregate="edit"),
        cluster_role("view", [], {f"{agg}edit": "true"}, aggregate="view"),
        cluster_role("system:aggregate-to-admin", admin, {f"{agg}admin": "true"}),
        cluster_role("system:aggregate-to-edit", edit, {f"{agg}admin": "true", f"{agg}edit": "true"}),
        cluster_role(
            "system:aggregate-to-view", view, {f"{agg}admin": "true", f"{agg}edit": "true", f"{agg}view": "true"}
        ),
    ]


def _component_roles() -> list[Obj]:
    scheduler = [
        rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
        rule(["create"], ["coordination.k8s.io"], ["leases"]),
        rule(["get", "update"], ["coordination.k8s.io"], ["leases"], ["kube-scheduler"]),
        rule(["delete", *READ], [""], ["pods"]),
        rule(["create"], [""], ["pods/binding", "bindings"]),
        rule(["patch", "update"], [""], ["pods/status"]),
        rule(
            READ,
            [""],
            [
                "nodes",
                "namespaces",
                "services",
                "replicationcontrollers",
                "persistentvolumeclaims",
                "persistentvolumes",
            ],
        ),
        rule(READ, ["apps"], ["replicasets", "statefulsets"]),
        rule(READ, ["policy"], ["poddisruptionbudgets"]),
        rule(READ, ["storage.k8s.io"], ["storageclasses", "csinodes", "csidrivers", "csistoragecapacities"]),
        # kube-scheduler 1.33 counts a node's attached CSI volumes from them (NodeVolumeLimits)
        rule(READ, ["storage.k8s.io"], ["volumeattachments"]),
        rule(READ, ["scheduling.k8s.io"], ["priorityclasses"]),
        rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
        rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    ]
    # One identity for every controller (raftkube's controller-manager runs them in one
    # process with one credential, where kube gives each controller a service account).
    controllers = [
        rule(
            ["*"],
            [
                "",
                "apps",
                "batch",
                "discovery.k8s.io",
                "policy",
                "autoscaling",
                "coordination.k8s.io",
                "events.k8s.io",
                "networking.k8s.io",
                "storage.k8s.io",
                "certificates.k8s.io",
            ],
            ["*"],
        ),
        rule(READ, ["*"], ["*"]),
        # the namespace controller empties a namespace of every kind (kube's namespace-controller role)
        rule(["update", "patch", "delete", "deletecollection"], ["*"], ["*"]),
        # the clusterrole-aggregation controller writes aggregated ClusterRoles, which needs
        # `escalate` (kube grants it to system:controller:clusterrole-aggregation-controller)
        rule(["escalate"], [RBAC], ["clusterroles"]),
        rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
        rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    ]
    node = [
        rule(READ, [""], ["nodes", "services", "endpoints", "pods"]),
        rule(["create", "update", "patch", "delete"], [""], ["nodes", "nodes/status", "pods/status"]),
        rule(["delete"], [""], ["pods"]),
        rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
        rule(["get"], [""], ["secrets", "configmaps", "persistentvolumeclaims", "serviceaccounts"]),
        rule(["create"], [""], ["serviceaccounts/token"]),
        rule(["create", "delete", "get", "patch", "update"], ["coordination.k8s.io"], ["leases"]),
    ]
    # kube's system:node-proxier: what a service proxy reads, and its events
    proxier = [
        rule(READ, [""], ["services", "endpoints", "nodes"]),
        rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
        rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
    ]
    # kube's system:kube-dns reads endpoints and services; ours also reads slices, pods and
    # namespaces (CoreDNS's kubernetes plugin does) and keeps its own kube-dns Service and slice
    dns = [
        rule(READ, [""], ["services", "endpoints", "pods", "namespaces"]),
        rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
        rule(["create", "update", "patch"], [""], ["services"]),
        rule(["create", "update", "patch"], ["discovery.k8s.io"], ["endpointslices"]),
    ]
    return [
        cluster_role("system:kube-scheduler", scheduler),
        cluster_role("system:kube-controller-manager", controllers),
        cluster_role("system:node", node),
        cluster_role("system:node-proxier", proxier),
        cluster_role("system:kube-dns", dns),
    ]


def bootstrap_objects() -> tuple[list[Obj], list[Obj]]:
    """(ClusterRoles, ClusterRoleBindings) every cluster starts with."""
    roles = [
        cluster_role("cluster-admin", [rule(["*"], ["*"], ["*"]), url_rule(["*"], ["*"])]),
        *_aggregate_roles(),
        cluster_role(
            "system:discovery",
            [
                url_rule(
                    ["get"],
                    [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/readyz",
                        "/openapi",
                        "/openapi/*",
                        "/version",
                        "/version/",
                    ],
                )
            ],
        ),
        cluster_role(
            "system:basic-user",
            [
                rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            [url_rule(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        ),
        cluster_role("system:monitoring", [url_rule(["get"], ["/metrics", "/healthz", "/livez", "/readyz"])]),
        # kube's, unbound: what a delegating authenticator/authorizer (a webhook, metrics-server) is bound to
        cluster_role(
            "system:auth-delegator",
            [
                rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
                rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            [
                url_rule(
                    ["get"],
                    [
                        "/.well-known/openid-configuration",
                        "/.well-known/openid-configuration/",
                        "/openid/v1/jwks",
                        "/openid/v1/jwks/",
                    ],
                )
            ],
        ),
        *_component_roles(),
    ]
    bindings = [
        binding("cluster-admin", "cluster-admin", [("Group", "system:masters")]),
        binding("system:discovery", "system:discovery", [("Group", "system:authenticated")]),
        binding("system:basic-user", "system:basic-user", [("Group", "system:authenticated")]),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            [("Group", "system:authenticated"), ("Group", "system:unauthenticated")],
        ),
        binding("system:monitoring", "system:monitoring", [("Group", "system:monitoring")]),
        binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            [("Group", "system:serviceaccounts")],
        ),
        binding("system:kube-scheduler", "system:kube-scheduler", [("User", "system:kube-scheduler")]),
        binding(
            "system:kube-controller-manager",
            "system:kube-controller-manager",
            [("User", "system:kube-controller-manager")],
        ),
        binding("system:node-proxier", "system:node-proxier", [("User", "system:kube-proxy")]),
        binding("system:kube-dns", "system:kube-dns", [("User", "system:kube-dns")]),
    ]
    return roles, bindings


SYSTEM_NAMESPACE = "kube-system"
AUTHENTICATION_READER = "extension-apiserver-authentication-reader"


def namespaced_objects() -> tuple[list[Obj], list[Obj]]:
    """(Roles, RoleBindings) every cluster starts with, each with its namespace: kube's
    kube-system role that lets a server read the ConfigMap extension-apiserver-authentication
    (how an aggregated server learns to trust the front proxy), bound to the scheduler and
    the controller-manager as kube binds it."""
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {**_meta(AUTHENTICATION_READER), "namespace": SYSTEM_NAMESPACE},
        "rules": [rule(READ, [""], ["configmaps"], ["extension-apiserver-authentication"])],
    }
    role_binding = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {**_meta(f"system::{AUTHENTICATION_READER}"), "namespace": SYSTEM_NAMESPACE},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": AUTHENTICATION_READER},
        "subjects": [
            {"apiGroup": RBAC, "kind": "User", "name": user}
            for user in ("system:kube-controller-manager", "system:kube-scheduler")
        ],
    }
    return [role], [role_binding]


def reconcile(existing: Obj | None, wanted: Obj) -> Obj | None:
    """What to write for a bootstrap object: `wanted` when absent, the existing object extended
    with the rules / subjects / labels it misses, or None when nothing needs writing."""
    if existing is None:
        return wanted
    meta = existing.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE) == "false":
        return None
    updated = dict(existing)
    changed = False
    for field in ("rules", "subjects"):
        if field not in wanted:
            continue
        have = list(existing.get(field) or [])
        for item in wanted[field]:
            if item not in have:
                have.append(item)
                changed = True
        updated[field] = have
    if "aggregationRule" in wanted and existing.get("aggregationRule") != wanted["aggregationRule"]:
        updated["aggregationRule"] = wanted["aggregationRule"]
        changed = True
    labels = dict(meta.get("labels") or {})
    for k, v in wanted["metadata"]["labels"].items():
        if labels.get(k) != v:
            labels[k] = v
            changed = True
    if not changed:
        return None
    updated["metadata"] = {**meta, "labels": labels}
    return updated
