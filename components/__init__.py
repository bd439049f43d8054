"""Clients of the control plane: the `raftkube` command line, the API client and informers,
the scheduler, the controller-manager's controllers and the kubelets."""
