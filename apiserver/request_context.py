"""Who the request being served runs as, for code deep in a write (admission) to read.

Set once per request by the HTTP layer, as kube puts the user in the request's context.
Writes that no client made (the bootstrap of system namespaces and roles) run as
system:apiserver, a member of system:masters, as kube's loopback client does.
"""

from __future__ import annotations

import contextvars

from apiserver.auth.user import User

APISERVER = User("system:apiserver", ("system:masters", "system:authenticated"))

_user: contextvars.ContextVar[User] = contextvars.ContextVar("raftkube_request_user", default=APISERVER)


def current_user() -> User:
    return _user.get()


def set_user(user: User) -> contextvars.Token[User]:
    return _user.set(user)


def reset_user(token: contextvars.Token[User]) -> None:
    _user.reset(token)
