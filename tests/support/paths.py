"""The repository's root, for tests that run its commands or read its files (cluster.toml,
README.md, the source they scan).

Computed here once, from this module's fixed place: a test module that counted its own parents
would point elsewhere as soon as it moved one folder deeper, and tests/ mirrors the code's
folders, so test modules move whenever the code does."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: the folder that holds store/, apiserver/, components/, machinery/ and tests/."""
