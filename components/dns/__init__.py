"""The cluster DNS server: the zone (records), the wire (server), kube-dns registration, and `raftkube dns` (main)."""
