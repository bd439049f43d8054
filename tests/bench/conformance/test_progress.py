"""A line per finished spec from ginkgo's verbose output, single-process and parallel.

The outputs below are hand-written after ginkgo v2's default reporter
(reporters/default_reporter.go) as e2e.test prints it with -v and no colour: a single
process streams a spec's name, its steps, then its header line; ginkgo's parallel output
gives the header first, then the name.  Thousands of bare `S` are the specs focus left out."""

from __future__ import annotations

from bench.conformance.progress import Progress

SINGLE = """\
Running Suite: Kubernetes e2e suite - /root/.cache/raftkube/peers/kubernetes-v1.33.13
======================================================================================
Random Seed: 1764884999 - will randomize all specs

Will run 4 of 6735 specs
------------------------------
[SynchronizedBeforeSuite]
k8s.io/kubernetes/test/e2e/e2e.go:77
[SynchronizedBeforeSuite] PASSED [1.912 seconds]
------------------------------
SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS
------------------------------
[sig-api-machinery] ServiceAccounts should mount an API token into pods  [Conformance]
k8s.io/kubernetes/test/e2e/auth/service_accounts.go:78
  STEP: Creating a kubernetes client @ 12/04/26 21:50:02.101
  STEP: reading a file in the container @ 12/04/26 21:50:09.990
\x1b[38;5;10m• [8.250 seconds]\x1b[0m
------------------------------
SSSSS
------------------------------
[sig-api-machinery] Watchers should be able to start watching from a specific resource version [Conformance]
k8s.io/kubernetes/test/e2e/apimachinery/watch.go:191
  STEP: creating a watch on configmaps @ 12/04/26 21:50:03.300
  [FAILED] Expected watch event ADDED for configmap e2e-watch-test-watch-closed, got none
  In [It] at: k8s.io/kubernetes/test/e2e/apimachinery/watch.go:262 @ 12/04/26 21:51:05.311
• [FAILED] [62.004 seconds]
[sig-api-machinery] Watchers [It] should be able to start watching from a specific resource version [Conformance]
k8s.io/kubernetes/test/e2e/apimachinery/watch.go:191

  [FAILED] Expected watch event ADDED for configmap e2e-watch-test-watch-closed, got none
  In [It] at: k8s.io/kubernetes/test/e2e/apimachinery/watch.go:262 @ 12/04/26 21:51:05.311
------------------------------
[sig-architecture] Conformance Tests should have at least two untainted nodes [Conformance]
k8s.io/kubernetes/test/e2e/architecture/conformance.go:39
S [SKIPPED] [0.414 seconds]
[sig-architecture] Conformance Tests [It] should have at least two untainted nodes [Conformance]
k8s.io/kubernetes/test/e2e/architecture/conformance.go:39

  [SKIPPED] Conformance requires at least two nodes
------------------------------
SSS
------------------------------
[sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup [Conformance]
k8s.io/kubernetes/test/e2e/apimachinery/discovery.go:124
  STEP: Creating a kubernetes client @ 12/04/26 21:51:10.000
• [0.731 seconds]
"""

PARALLEL = """\
Running Suite: Kubernetes e2e suite - /root/.cache/raftkube/peers/kubernetes-v1.33.13
Will run 3 of 6735 specs
Running in parallel across 2 processes
SSSSSSSSSSSSSSSSSSSS
------------------------------
• [0.731 seconds]
[sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup [Conformance]
k8s.io/kubernetes/test/e2e/apimachinery/discovery.go:124

  Timeline >>
  STEP: Creating a kubernetes client @ 12/04/26 21:51:10.000
  << Timeline
------------------------------
SSSSSSSSSS
------------------------------
• [TIMEDOUT] [300.000 seconds]
[sig-node] Pods [It] should be updated [NodeConformance] [Conformance]
k8s.io/kubernetes/test/e2e/common/node/pods.go:345
------------------------------
• [8.250 seconds]
[sig-api-machinery] ServiceAccounts should mount an API token into pods  [Conformance] [sig-auth, Conformance]
k8s.io/kubernetes/test/e2e/auth/service_accounts.go:78
"""


def run(text: str) -> tuple[Progress, list[str]]:
    progress = Progress()
    shown = [line for raw in text.splitlines(keepends=True) for line in progress.feed(raw)]
    return progress, shown + progress.finish()


def test_single_process_a_line_per_finished_spec_named_and_counted() -> None:
    progress, shown = run(SINGLE)
    assert shown == [
        "[1 passed, 0 failed, 0 skipped] PASSED  [sig-api-machinery] ServiceAccounts should mount an API token"
        " into pods  [Conformance] (8.2 s)",
        "[1 passed, 1 failed, 0 skipped] FAILED  [sig-api-machinery] Watchers [It] should be able to start"
        " watching from a specific resource version [Conformance] (62.0 s)",
        "[1 passed, 1 failed, 1 skipped] SKIPPED [sig-architecture] Conformance Tests [It] should have at least"
        " two untainted nodes [Conformance] (0.4 s)",
        "[2 passed, 1 failed, 1 skipped] PASSED  [sig-api-machinery] Discovery should validate PreferredVersion"
        " for each APIGroup [Conformance] (0.7 s)",
    ]
    assert progress.counts.not_selected == 39 + 5 + 3  # counted, never listed


def test_parallel_output_names_each_spec_from_the_line_after_its_header() -> None:
    progress, shown = run(PARALLEL)
    assert [line.split("] ", 1)[1] for line in shown] == [
        "PASSED  [sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup"
        " [Conformance] (0.7 s)",
        "TIMEDOUT [sig-node] Pods [It] should be updated [NodeConformance] [Conformance] (300.0 s)",
        "PASSED  [sig-api-machinery] ServiceAccounts should mount an API token into pods  [Conformance] (8.2 s)",
    ]
    assert (progress.counts.passed, progress.counts.failed, progress.counts.not_selected) == (2, 1, 30)


def test_a_failed_suite_setup_is_said() -> None:
    _, shown = run("[SynchronizedBeforeSuite] [FAILED] [30.000 seconds]\nk8s.io/kubernetes/test/e2e/e2e.go:77\n")
    assert shown == [
        "[0 passed, 0 failed, 0 skipped] suite setup SynchronizedBeforeSuite FAILED: every spec may be skipped"
    ]
