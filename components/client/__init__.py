"""The components' client library: everything a control loop needs to talk to the apiserver.

Contracts, after client-go's:
* `kubeconfig`: contexts, CA data, bearer tokens and client certificates, as kubectl reads them.
* `rest`: one pooled HTTPS session per process; JSON through orjson; a non-2xx answer becomes
  an `ApiError` carrying the server's `Status` (reason, code, message).
* `reflector` / `informer`: list, then watch from the list's resourceVersion; a dropped stream
  resumes from the last version seen; 410 Gone re-lists.  The local store converges to the
  server's state (shared informers: one watch per resource per process).
* `workqueue`: a key is never handed to two workers at once, is de-duplicated while waiting,
  and is retried with per-item exponential back-off under an overall rate limit.
* `leaderelection`: a `coordination.k8s.io` Lease held by one candidate at a time.

Time comes from a `Clock` (`clock.py`) so that every delay is testable with a fake one.
"""
