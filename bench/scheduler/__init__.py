"""`raftkube bench scheduler`: pods/s the scheduler binds on Node objects without kubelets.

cli        flags, the run and its cleanup (standard library only at import time)
cluster    the Node and Pod objects, created through the apiserver before the scheduler runs
binds      a watch from the driver that stamps the moment each pod gets spec.nodeName
schedproc  the scheduler as a process: start, "informers synced", /metrics, CPU, memory
case       one (pods, nodes) case from a fresh store and apiserver to its figures
histogram  quantiles of a Prometheus histogram as /metrics shows it
profile    a py-spy record of the scheduler, summarised for our own code
report, targets, plot   the table, the JSON document, the goal and the PNG
"""
