"""Whether a toleration tolerates a taint: core/v1 Toleration.ToleratesTaint, which the scheduler's
TaintToleration filter and the node lifecycle controller's NoExecute evictions both ask.

Kube's rules, in its order: a toleration with an effect tolerates only taints of that effect (an
empty effect tolerates every effect); one with a key only taints of that key (an empty key, which
validation allows only with `Exists`, every key); then `Exists` tolerates whatever value the taint
has, `Equal` (or no operator) needs the same value, and any other operator tolerates nothing.

One case kube never reaches: an empty key with `Equal`, which kube's validation refuses ("operator
must be Exists when `key` is empty") and ours does not yet.  It tolerates nothing here, as both
copies this replaces decided, rather than every taint whose value is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether `toleration` tolerates `taint` (both as stored: absent fields read as "")."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if not key:
        return False
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False
