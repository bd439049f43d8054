"""Fixtures: a real cluster (three store members and the apiserver, `raftkube up`) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apiserver.support import ApiserverUnderTest, running_apiserver


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    """`raftkube up` on free ports: the admin kubeconfig is `cluster.kubeconfig`, the components'
    are under `cluster.data_dir / "apiserver" / "kubeconfigs"`."""
    with running_apiserver(tmp_path_factory.mktemp("cluster"), "raftkube") as server:
        yield server
