"""The authenticator of in-process apiserver tests (build_app without a server): every request
is a cluster admin (system:masters), so that a test sees the resources, not the gates."""

from __future__ import annotations

from typing import Any

from apiserver.auth.user import User


class Admin:
    def authenticate(self, scope: Any) -> User:
        return User("tester", ("system:masters",))
