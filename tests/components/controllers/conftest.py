"""The controllers' tests share the components' cluster fixture."""

from tests.components.conftest import cluster

__all__ = ["cluster"]
