"""`kubectl api-resources` (kubectl 1.33) against our apiserver lists every resource a default
kube-apiserver 1.33 lists (data/kube-1.33-api-resources.txt says where that list comes from), with
kube's short names, version, scope and kind; the few not served yet are named here, each with the
issue that adds it, so a new gap fails the test and a filled one must leave this list."""

from __future__ import annotations

from pathlib import Path

from tests.apiserver.kubectl_support import rows
from tests.apiserver.support import ApiserverUnderTest

KUBE_133 = Path(__file__).parent / "data" / "kube-1.33-api-resources.txt"

NOT_YET = {
    ("v1", "bindings"): "core Binding: pods/binding serves the scheduler; the top-level resource is not served",
}


def _kube_133() -> dict[tuple[str, str], list[str]]:
    lines = [line.split() for line in KUBE_133.read_text().splitlines() if line and not line.startswith("#")]
    return {(cols[2], cols[0]): cols for cols in lines}


def test_every_kube_133_resource_is_listed(raftkube_apiserver: ApiserverUnderTest) -> None:
    listed = rows(raftkube_apiserver.ok("api-resources", minor=33))[1:]
    ours = {}
    for cols in listed:
        # SHORTNAMES is blank for a resource without one: kubectl prints one column fewer
        full = cols if len(cols) == 5 else [cols[0], "-", *cols[1:]]
        ours[(full[2], full[0])] = full
    expected = _kube_133()
    missing = sorted(k for k in expected if k not in ours and k not in NOT_YET)
    assert missing == [], missing
    wrong = {k: (ours[k], want) for k, want in expected.items() if k in ours and ours[k] != want}
    assert wrong == {}, wrong
    assert sorted(k for k in NOT_YET if k in ours) == [], "served now: drop it from NOT_YET"
