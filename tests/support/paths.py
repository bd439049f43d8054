"""The repository's root, for tests that run its commands or read its files (cluster.toml,
README.md, the source they scan).

Computed here once, from this module's fixed place: a test module that counted its own parents
would point elsewhere as soon as it moved one folder deeper, and tests/ mirrors the code's
folders, so test modules move whenever the code does."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: the folder that holds store/, apiserver/, components/, machinery/ and tests/."""

# cluster.toml for tests whose pods share the host's network (`pod_network = "auto"` is the pod
# network as root): most tests need no service proxy or DNS, and a pod network is one per machine
HOST_NETWORK = '[kubelets]\npod_network = "host"\n'
