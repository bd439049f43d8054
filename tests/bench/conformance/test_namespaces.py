"""Which namespaces a run leaves that are its own to delete: new since the run began, and
named as e2e names them (`<base>-<n>`, n below 10,000); a user's namespaces never are."""

from __future__ import annotations

from bench.conformance.namespaces import left_by_run


def test_only_new_e2e_shaped_namespaces_are_the_runs() -> None:
    before = {"default", "kube-system", "team-1"}
    after = before | {"watch-4711", "kubectl-12", "emptydir-wrapper-7", "my-app", "build-123456", "Bad-12"}
    assert left_by_run(before, after) == ["emptydir-wrapper-7", "kubectl-12", "watch-4711"]
    assert left_by_run(after, after) == []
