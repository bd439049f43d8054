"""RBAC: Roles, ClusterRoles and their bindings, evaluated from the watch caches."""
