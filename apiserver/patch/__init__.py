"""Patching objects: JSON merge patch, strategic merge patch and server-side apply, as pure
functions over decoded JSON (the registry reads, calls these, and writes)."""
