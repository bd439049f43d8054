"""Fixtures: a real apiserver process per module and backend (see support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apiserver.support import BACKENDS, ApiserverUnderTest, running_apiserver


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    """The apiserver over each storage backend in turn (modules that use it run twice)."""
    with running_apiserver(tmp_path_factory.mktemp(f"api-{request.param}"), request.param) as server:
        yield server


@pytest.fixture(scope="module")
def raftkube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    """The apiserver over the raftkube store only (for tests of the store's own behaviour)."""
    with running_apiserver(tmp_path_factory.mktemp("api-raftkube"), "raftkube") as server:
        yield server
