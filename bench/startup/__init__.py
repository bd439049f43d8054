"""`raftkube bench startup`: pod start-up latency on hollow nodes, and `raftkube up` to Ready nodes."""
