"""CustomResourceDefinitions: kinds defined while the server runs.

`structural` checks, defaults and describes a custom resource against its CRD's schema;
`kinds` turns a stored CRD into the `ResourceDef`s of its served versions (the same plain data
every built-in kind is, so the generic registry, router, watch cache and discovery serve them);
`serving` follows the stored CRDs and keeps what the server serves in step with them, writing
each CRD's conditions and removing a deleted CRD's objects, as kube's apiextensions-apiserver
controllers do.
"""
