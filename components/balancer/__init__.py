"""The TCP balancer in front of an HA control plane's apiservers (`raftkube apiserver-balancer`)."""
