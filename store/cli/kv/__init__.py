"""`raftkube kv ...`: etcdctl-style reads, writes, txns, watches, compaction and leases.

One concern a module: `commands` (the subcommands and running one), `arguments` (words to
bytes, ranges and numbers), `lease_ids`, `printers` (JSON and human output), `txn_grammar`.

Choices the issue left open, so that scripts can rely on them:

* Bytes.  Keys and values on the command line are the bytes the shell passed (os.fsencode;
  normally UTF-8), txn text is read as bytes.  Human output writes keys and values
  as raw bytes, as etcdctl does, so `kv get K --print-value-only > f` round-trips binary
  values.  JSON output decodes them as UTF-8 with errors="backslashreplace": a byte 0xff
  shows as the four characters `\\xff` (indistinguishable from those characters stored
  literally; use human output for binary data).  JSON is always written as UTF-8.
* Exit status.  0 success; 2 bad usage or a request the store refused (the message names the
  error code, `raftkube: key-empty: ...`): retrying the same command cannot help.  1 when the
  cluster could not serve it (unavailable, no leader, timeout, leader changed, internal
  error): retrying may help, and a write's outcome may be unknown.  Ctrl-C exits 130.
* Lease IDs are accepted as `0x`-prefixed hex, hex with a letter in it, or decimal.  A string
  of digits only could be either (lease grant prints hex): it is looked up in the lease list
  and means whichever of the two exists; decimal when neither does.
* JSON shapes: a key-value is {key, value, create_revision, mod_revision, version, lease};
  txn responses are {"op": "get", kvs, count, more}, {"op": "put", prev_kv} and
  {"op": "del", deleted, prev_kvs}; watch prints one line per event, plus
  {"type": "PROGRESS", "revision": R} lines only when --progress-notify asked for them;
  lease commands print {header, id, id_hex, ...}; compact prints {header, compact_revision}.
* Human output of `get --count-only` is the count (etcdctl prints nothing there).
"""
