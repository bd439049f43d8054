"""The store's command-line commands (`raftkube store ...`, `raftkube kv ...`)."""
