"""An apiserver app in this process, over the in-memory storage, with several token users: the
gates (authentication, authorization, admission) are tested through real HTTP requests without
starting processes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from apiserver.auth.authn import Authenticator
from apiserver.auth.user import User
from apiserver.http.app import build_app
from tests.apiserver.memstorage import MemStorage

ADMIN = User("admin", ("system:masters",))
ClientFor = Callable[[str | None], httpx.AsyncClient]


@contextlib.asynccontextmanager
async def in_process(users: dict[str, User], **options: Any) -> AsyncIterator[ClientFor]:
    """Yields `client(token)` (None: no credentials); token "admin" is a system:masters user."""
    app = build_app(
        MemStorage(progress=True), Authenticator({"admin": ADMIN, **users}), compaction_interval=0, **options
    )
    async with app.running():
        transport = httpx.ASGITransport(app=app)
        clients: list[httpx.AsyncClient] = []

        def client(token: str | None) -> httpx.AsyncClient:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            c = httpx.AsyncClient(transport=transport, base_url="https://apiserver", headers=headers)
            clients.append(c)
            return c

        try:
            yield client
        finally:
            for c in clients:
                await c.aclose()


def role_binding(name: str, role_kind: str, role: str, subjects: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [
            {
                "kind": kind,
                "name": who,
                **({"apiGroup": "rbac.authorization.k8s.io"} if kind != "ServiceAccount" else {}),
            }
            for kind, who in subjects
        ],
    }
