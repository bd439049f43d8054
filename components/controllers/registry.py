"""Every controller the controller-manager can run, by the name `--controllers` uses."""

from __future__ import annotations

from components.controllers.base import Controller
from components.controllers.cronjob import CronJobController
from components.controllers.daemonset import DaemonSetController
from components.controllers.deployment import DeploymentController
from components.controllers.disruption import DisruptionController
from components.controllers.endpoints import EndpointsController
from components.controllers.endpointslice import EndpointSliceController
from components.controllers.endpointslicemirroring import EndpointSliceMirroringController
from components.controllers.garbagecollector import GarbageCollector
from components.controllers.horizontalpodautoscaler import HorizontalPodAutoscalerController
from components.controllers.job import JobController
from components.controllers.namespace import NamespaceController
from components.controllers.nodelifecycle import NodeLifecycleController
from components.controllers.persistentvolume import PersistentVolumeController
from components.controllers.replicaset import ReplicaSetController, ReplicationManager
from components.controllers.resourcequota import ResourceQuotaController
from components.controllers.rootcacertpublisher import RootCACertPublisher
from components.controllers.serviceaccount import ServiceAccountController
from components.controllers.statefulset import StatefulSetController

CONTROLLERS: dict[str, type[Controller]] = {
    c.name: c
    for c in (
        ServiceAccountController,
        RootCACertPublisher,
        GarbageCollector,
        ReplicaSetController,
        ReplicationManager,
        DeploymentController,
        DaemonSetController,
        StatefulSetController,
        JobController,
        CronJobController,
        NamespaceController,
        EndpointsController,
        EndpointSliceController,
        EndpointSliceMirroringController,
        ResourceQuotaController,
        NodeLifecycleController,
        DisruptionController,
        PersistentVolumeController,
        HorizontalPodAutoscalerController,
    )
}


def select(spec: str) -> list[type[Controller]]:
    """kube's `--controllers` syntax, comma-separated: `*` (every controller), `name` (this one),
    `-name` (not this one).  A controller runs when named, or under `*` unless `-name`d.
    ValueError names an unknown controller."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    for item in items:
        name = item.removeprefix("-")
        if item != "*" and name not in CONTROLLERS:
            raise ValueError(f"--controllers: unknown controller {name!r} (known: {', '.join(sorted(CONTROLLERS))})")
    star = "*" in items
    return [c for n, c in CONTROLLERS.items() if n in items or (star and f"-{n}" not in items)]
