"""Prometheus metrics, named as kube-scheduler names them, on a registry of our own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=self.registry,
        )
        self.e2e = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue.",
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 300),
            registry=self.registry,
        )
        self.pending = Gauge(
            "scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"], registry=self.registry
        )
        self.preemptions = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=self.registry
        )
        self.victims = Counter(
            "scheduler_preemption_victims", "Number of selected preemption victims", registry=self.registry
        )
