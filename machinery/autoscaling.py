"""The HorizontalPodAutoscaler's scaling rules as kube defaults them (autoscaling/v2
`behavior`): what the apiserver writes into a behavior left partly empty and what the
controller applies when there is none."""

from __future__ import annotations

from typing import Any

SCALE_UP: dict[str, Any] = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
"""Up at once, by 4 pods or by 100 % every 15 s, whichever is more."""

SCALE_DOWN: dict[str, Any] = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}
"""Down to any size every 15 s, after a stabilization window of DOWN_STABILIZATION_S."""

DOWN_STABILIZATION_S = 300
"""The scale-down stabilization window when none is given (the apiserver leaves it unset: kube's
controller reads it from its --horizontal-pod-autoscaler-downscale-stabilization, 5 minutes)."""

TOLERANCE = 0.1
"""A ratio of current to target within 10 % of 1 changes nothing (kube's default tolerance)."""
