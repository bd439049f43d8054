"""The Kubernetes API server on top of the raftkube store (not built yet: see the issues)."""
