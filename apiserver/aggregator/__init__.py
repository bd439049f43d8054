"""API aggregation: group-versions served by other servers, named by APIService objects.

kube-aggregator's part of kube-apiserver, rebuilt: an APIService with a `service` hands its
group-version to the server behind that Service.  `front_proxy` is how the aggregator proves
who it is and whom it speaks for (a client certificate of its own CA and `X-Remote-*`
headers, published in kube-system/extension-apiserver-authentication for the servers to
trust); `availability` checks each remote group-version and learns its resources for
discovery; `proxy` relays requests to it.
"""
