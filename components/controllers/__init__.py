"""The controllers the controller-manager runs: each is shared informers + a work queue + a
reconcile function of one key (`base.Controller`).  Reconciles are level-based: they read the
informers' stores (the desired and the observed state), act through the REST client, and
may run any number of times for one key with the same result."""
