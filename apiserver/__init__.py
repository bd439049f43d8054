"""The Kubernetes API server on top of the raftkube store: HTTP API, authentication and
authorization, admission, registry and strategies, the storage layer and the watch cache."""
