"""ValidatingAdmissionPolicy: admissionregistration.k8s.io/v1 policies and bindings whose CEL
expressions admit or refuse writes, as kube-apiserver's plugin of that name does.

One concept per module: `matching` (which requests a policy or binding covers), `compiled` (a
policy compiled once per generation, and `compile_errors` for write-time validation),
`binding`, `params`, `evaluate` (one policy, binding and param -> decisions),
`source` (the policies and bindings of the watch caches, recompiled when they change) and
`plugin` (the admission plugin).  What the webhooks share with it is one level up:
`apiserver/admission/cel.py` (the CEL library, one environment per variable set),
`matchconditions.py` and `requestvars.py` (the `request` and `namespaceObject` variables).
"""
