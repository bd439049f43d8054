"""ValidatingAdmissionPolicy: admissionregistration.k8s.io/v1 policies and bindings whose CEL
expressions admit or refuse writes, as kube-apiserver's plugin of that name does.

One concept per module: `celenv` (the CEL library, behind one small interface), `matching`
(which requests a policy or binding covers), `compiled` (a policy compiled once per generation,
and `compile_errors` for write-time validation), `binding`, `params`, `requestvars` (the
variables an expression sees), `evaluate` (one policy, binding and param -> decisions),
`source` (the policies and bindings of the watch caches, recompiled when they change) and
`plugin` (the admission plugin).
"""
