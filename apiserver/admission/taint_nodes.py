"""TaintNodesByCondition: a new Node starts tainted `node.kubernetes.io/not-ready:NoSchedule`,
so nothing is scheduled on it before its kubelet reports Ready (the node lifecycle controller
removes the taint then), as kube's plugin does."""

from __future__ import annotations

from apiserver.admission.interface import AdmissionRequest

NOT_READY = "node.kubernetes.io/not-ready"


class TaintNodesByCondition:
    name = "TaintNodesByCondition"

    def handles(self, request: AdmissionRequest) -> bool:
        return (
            request.operation == "CREATE"
            and request.resource.group == ""
            and request.resource.plural == "nodes"
            and not request.subresource
        )

    async def admit(self, request: AdmissionRequest) -> None:
        node = request.object
        if node is None:
            return
        spec = node.get("spec")
        if spec is None:
            spec = node["spec"] = {}
        if not isinstance(spec, dict):
            return  # validation refuses it
        taints = spec.get("taints")
        if taints is None:
            taints = spec["taints"] = []
        if not isinstance(taints, list):
            return
        for t in taints:
            if isinstance(t, dict) and t.get("key") == NOT_READY and t.get("effect") == "NoSchedule":
                return
        taints.append({"key": NOT_READY, "effect": "NoSchedule"})
