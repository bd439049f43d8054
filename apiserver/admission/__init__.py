"""Admission: the plugins a write passes after decoding and before storage (see `interface`)."""
