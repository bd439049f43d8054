"""PATCH bodies applied to stored objects, one module per patch type.

`json_patch` (application/json-patch+json, RFC 6902), `merge_patch` (application/merge-patch+json,
RFC 7386), `strategic` (application/strategic-merge-patch+json) and `apply` (server-side apply).
Every one of them raises `errors.PatchError`, which carries the HTTP status Kubernetes answers.
"""
