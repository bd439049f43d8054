"""The handlers of subresources, one module per kind of subresource (as kube's StatusREST,
ScaleREST, BindingREST, EvictionREST and the log/exec/portforward/proxy connecters).

A resource definition lists its subresources with their handler objects; the router checks the
verb against what the definition declares and calls the handler, so serving a new kind's
subresources (a CustomResourceDefinition's status and scale) needs no new code path.
"""
