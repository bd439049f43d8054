"""Clients of the control plane: the `raftkube` command line, and (to come) the API client,
informers, scheduler, controllers and kubelets."""
