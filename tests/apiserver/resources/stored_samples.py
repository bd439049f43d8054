"""A valid object of each kind served by `stored_kind`, and an invalid one with the fields kube's
validation names (shared by the round-trip tests and the catalog's good-and-bad cases)."""

from __future__ import annotations

import copy

from machinery.objects import Obj

POD_SPEC = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": POD_SPEC}
SELECTOR = {"matchLabels": {"app": "a"}}
CSR_REQUEST = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K"

# (group, plural) -> a minimal valid object of the kind
SAMPLES: dict[tuple[str, str], Obj] = {
    ("", "replicationcontrollers"): {"spec": {"selector": {"app": "a"}, "template": TEMPLATE}},
    ("", "podtemplates"): {"template": TEMPLATE},
    ("", "persistentvolumes"): {
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/v"}}
    },
    ("", "persistentvolumeclaims"): {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    },
    ("storage.k8s.io", "storageclasses"): {"provisioner": "example.com/disk"},
    ("storage.k8s.io", "csinodes"): {"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1"}]}},
    ("storage.k8s.io", "csidrivers"): {"spec": {}},
    ("storage.k8s.io", "csistoragecapacities"): {"storageClassName": "standard", "capacity": "10Gi"},
    ("storage.k8s.io", "volumeattachments"): {
        "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}
    },
    ("apps", "statefulsets"): {"spec": {"selector": SELECTOR, "serviceName": "s", "template": TEMPLATE}},
    ("apps", "daemonsets"): {"spec": {"selector": SELECTOR, "template": TEMPLATE}},
    ("apps", "controllerrevisions"): {"revision": 1, "data": {"spec": {}}},
    ("certificates.k8s.io", "certificatesigningrequests"): {
        "spec": {"request": CSR_REQUEST, "signerName": "example.com/signer", "usages": ["digital signature"]}
    },
    ("networking.k8s.io", "networkpolicies"): {"spec": {"podSelector": {}}},
    ("networking.k8s.io", "ipaddresses"): {
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}
    },
    ("networking.k8s.io", "servicecidrs"): {"spec": {"cidrs": ["10.96.0.0/24"]}},
    ("node.k8s.io", "runtimeclasses"): {"handler": "runc"},
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): {
        "spec": {"priorityLevelConfiguration": {"name": "global-default"}}
    },
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): {
        "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}
    },
}


def _with(key: tuple[str, str], **changes: object) -> Obj:
    obj = copy.deepcopy(SAMPLES[key])
    for path, value in changes.items():
        *parents, last = path.split("__")
        at = obj
        for p in parents:
            at = at.setdefault(p, {})
        if value is None:
            at.pop(last, None)
        else:
            at[last] = value
    return obj


# (group, plural) -> (an invalid object without metadata, the fields kube's validation names)
BAD: dict[tuple[str, str], tuple[Obj, set[str]]] = {
    ("", "replicationcontrollers"): (_with(("", "replicationcontrollers"), spec__replicas=-1), {"spec.replicas"}),
    ("", "podtemplates"): (
        {"template": {"metadata": {"labels": {"a b": "x"}}, "spec": POD_SPEC}},
        {"template.metadata.labels"},
    ),
    ("", "persistentvolumes"): (_with(("", "persistentvolumes"), spec__capacity="lots"), {"spec.capacity"}),
    ("", "persistentvolumeclaims"): (
        _with(("", "persistentvolumeclaims"), spec__accessModes=[5]),
        {"spec.accessModes[0]"},
    ),
    ("", "componentstatuses"): ({"conditions": "fine"}, {"conditions"}),
    ("storage.k8s.io", "storageclasses"): ({}, {"provisioner"}),
    ("storage.k8s.io", "csinodes"): (
        {"spec": {"drivers": [{"name": 1}]}},
        {"spec.drivers[0].name", "spec.drivers[0].nodeID"},
    ),
    ("storage.k8s.io", "csidrivers"): ({"spec": {"attachRequired": "yes"}}, {"spec.attachRequired"}),
    ("storage.k8s.io", "csistoragecapacities"): ({"capacity": "1Gi"}, {"storageClassName"}),
    ("storage.k8s.io", "volumeattachments"): (
        _with(("storage.k8s.io", "volumeattachments"), spec__nodeName=None),
        {"spec.nodeName"},
    ),
    ("apps", "statefulsets"): (
        _with(("apps", "statefulsets"), spec__podManagementPolicy="Random"),
        {"spec.podManagementPolicy"},
    ),
    ("apps", "daemonsets"): (
        _with(("apps", "daemonsets"), spec__updateStrategy={"type": "Sometimes"}),
        {"spec.updateStrategy.type"},
    ),
    ("apps", "controllerrevisions"): ({"revision": "one"}, {"revision"}),
    ("certificates.k8s.io", "certificatesigningrequests"): (
        {"spec": {"usages": ["digital signature"]}},
        {"spec.request", "spec.signerName"},
    ),
    ("networking.k8s.io", "networkpolicies"): (
        {"spec": {"podSelector": {}, "policyTypes": "Ingress"}},
        {"spec.policyTypes"},
    ),
    ("networking.k8s.io", "ipaddresses"): ({"spec": {"parentRef": {"resource": "services"}}}, {"spec.parentRef.name"}),
    ("networking.k8s.io", "servicecidrs"): ({"spec": {"cidrs": "10.0.0.0/24"}}, {"spec.cidrs"}),
    ("node.k8s.io", "runtimeclasses"): ({}, {"handler"}),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): ({"spec": {}}, {"spec.priorityLevelConfiguration.name"}),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): ({"spec": {}}, {"spec.type"}),
}
