"""`raftkube conformance`: the upstream conformance suite (e2e.test, v1.33) against a fresh
`raftkube up` or a given kubeconfig, and its JUnit reports turned into a per-SIG summary.

One concept a module: options (the flags, checked), passes (the parallel and serial passes
and the command lines they run), progress (a line per finished spec from ginkgo's output),
cluster (the fresh cluster and its teardown), namespaces (the test namespaces a run leaves),
run (the orchestration, bounded in time), junit (parsing ginkgo's JUnit XML), report (the
JSON summary and the Markdown table).  The CLI imports this package only when a
`conformance` command runs (components.cli.conformance).
"""
