"""One module per verb on a resource (as kube's k8s.io/apiserver/pkg/endpoints/handlers): get,
list, watch, create, update, patch, delete, and the create of resources that are answered
rather than stored.  Each is a function of the `ResourceScope` (what every handler reaches),
the request, the resource's definition and the parsed path; `apiserver.http.router` picks one.
Nothing here knows a resource by name: what differs between kinds is in their `ResourceDef`.
"""
