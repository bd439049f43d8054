"""`/version`: kubectl and the gcloud dispatcher parse it (G12)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.version import version_info

# semver 2.0.0, with the leading "v" Kubernetes puts on gitVersion
SEMVER = re.compile(
    r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?$"
)


def test_version_info_claims_1_33() -> None:
    info = version_info("0.1.0")
    assert (info["major"], info["minor"]) == ("1", "33")
    assert info["gitVersion"] == "v1.33.0-raftkube.0.1.0"
    assert set(info) >= {
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    }
    assert all(isinstance(v, str) for v in info.values())
    assert re.match(r"^[a-z]+/[a-z0-9_]+$", info["platform"])


def test_installed_package_version_is_used() -> None:
    assert SEMVER.match(version_info()["gitVersion"])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_git_version_is_semver_whatever_the_package_version(pkg: str) -> None:
    info = version_info(pkg)
    assert SEMVER.match(info["gitVersion"]), info["gitVersion"]
    assert info["gitVersion"].startswith("v1.33.0-raftkube.")
