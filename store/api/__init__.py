"""The store's API: request, response and event types (etcd v3 shapes), typed errors, and
their msgpack wire form.  Shared by the member server, the client, the CLI and the tests."""
