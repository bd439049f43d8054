"""The service proxy: kube-proxy's nftables mode, one table per node.

* `rules`: pure; Services and EndpointSlices (hostile dicts) in, the node's table out.
* `nft`: that table into the kernel in one `nft -f -` transaction (whole, or by difference
  over the last one applied), out again on exit, and our tables listed.
* `proxier`: informers and the sync loop (coalesced, event-to-live latency measured).
* `main`: `raftkube proxy`.
"""
