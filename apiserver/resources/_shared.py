"""Small helpers shared by the resource declarations: defaulting, label-selector text and
container cells.  Stored objects were validated, but a row function must still never raise on a
field of an unexpected type, so they read through machinery.objects' tolerant getters."""

from __future__ import annotations

from typing import Any

from machinery.objects import Obj, dicts, text
from machinery.selectors import LabelSelector, SelectorError


def ensure(obj: Obj, name: str) -> Obj | None:
    """`obj[name]`, created as {} when absent; None when it holds something that is not an object
    (defaulting leaves a malformed field alone and lets validation name it)."""
    value = obj.setdefault(name, {})
    return value if isinstance(value, dict) else None


def format_labels(labels: Any) -> str:
    """labels.FormatLabels: `a=b,c=d` sorted by key, `<none>` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def selector_string(selector: Any) -> str:
    """A metav1.LabelSelector as `labels.Selector.String()` (`machinery.selectors`' canonical text):
    "" for a null or empty selector, `<error>` for one kube's LabelSelectorAsSelector refuses."""
    if selector is None:
        return ""
    try:
        return str(LabelSelector.from_dict(selector))
    except SelectorError:
        return "<error>"


def format_label_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector: as `selector_string`, with `<none>` for an empty selector."""
    return selector_string(selector) or "<none>"


def container_cells(pod_spec: Any) -> tuple[str, str]:
    """The wide Containers and Images cells: names and images of the containers, comma-joined."""
    containers = dicts(pod_spec, "containers")
    return ",".join(text(c, "name") for c in containers), ",".join(text(c, "image") for c in containers)


def has_condition(obj: Any, kind: str, status: str = "True") -> bool:
    return any(text(c, "type") == kind and text(c, "status") == status for c in dicts(obj, "status.conditions"))
