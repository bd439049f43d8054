"""How many requests and watches the apiserver works on at once, shared fairly by user.

Past a limit a client gets 429 TooManyRequests with `Retry-After: 1` (as kube-apiserver's
max-requests-inflight and API Priority and Fairness answer), so a flood of requests or watches
costs the server a bounded amount of memory instead of everything it has.

The model is kube's API Priority and Fairness, simplified to what a single-process server
needs and argued here:

- Priority levels (kube: exempt, system, workload-high/low, global-default) become three pools,
  chosen by who asks (kube's flow schemas match on user and group the same way):
  `exempt` (group system:masters: the admin, and up's hollow-node process), `system` (the
  control plane: kube-controller-manager, kube-scheduler, kube-proxy, the apiserver itself,
  nodes in group system:nodes, and service accounts of kube-system) and `workload` (every
  other user, anonymous included).  Each pool has its own seats of each kind (`read`,
  `write`, `watch`), so nothing users do can take a seat the controllers, the scheduler or the
  kubelets need: kube reserves each priority level's share the same way.
- Within a pool, a flow is one user (kube's flow distinguisher ByUser).  Kube shares a level's
  seats by fair queuing, but its watches hold a seat only while they start; here a watch holds
  its seat for its whole life, because an open watch is what costs memory.  Queuing cannot
  share seats that are held for minutes, so instead of queues each user gets a cap: it may hold
  at most `max(floor, limit // (others + 2))` seats, where `others` counts the users of that
  pool holding seats of that kind now.  Alone, a user gets half the pool, so the other half is
  always there for whoever comes next; each newcomer lowers everyone's cap (seats already held
  are kept, new ones refused until the user is back under it).  `floor` keeps the cap useful
  when many users are active.  The pool's own limit still bounds the total.
- The exempt pool is not shared per user (kube's exempt level is not limited at all; here it
  still has a ceiling, so even the admin cannot make the server's memory unbounded), nor are
  the control plane's single-instance components (they are trusted, and a controller-manager
  restarting while a thousand kubelets are connected must still open all its informers).

The memory bound this gives: at most 3 x `watches` open watches (one pool each), and at
most `watches // 2` for any one ordinary user.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from apiserver import errors
from apiserver.auth.user import User

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KINDS = ("read", "write", "watch")

EXEMPT, SYSTEM, WORKLOAD = "exempt", "system", "workload"
EXEMPT_GROUP = "system:masters"
NODES_GROUP = "system:nodes"
# the control plane's own components: one process each, never limited per user
CONTROL_PLANE_USERS = frozenset(
    {"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver"}
)
KUBE_SYSTEM_SERVICE_ACCOUNTS = "system:serviceaccount:kube-system:"
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class InFlightLimits:
    """Seats of each kind in each pool, and the least any user's share falls to."""

    reads: int = 400
    writes: int = 200
    watches: int = 2_000
    floor: int = 10

    def __post_init__(self) -> None:
        for name in ("reads", "writes", "watches", "floor"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    def of(self, kind: str) -> int:
        return {"read": self.reads, "write": self.writes, "watch": self.watches}[kind]


def pool_of(user: User | None) -> str:
    """The priority level a user's requests draw seats from (see the module docstring)."""
    if user is None:
        return WORKLOAD
    if EXEMPT_GROUP in user.groups:
        return EXEMPT
    if user.name in CONTROL_PLANE_USERS or NODES_GROUP in user.groups:
        return SYSTEM
    if user.name.startswith(KUBE_SYSTEM_SERVICE_ACCOUNTS):
        return SYSTEM
    return WORKLOAD


def shared_per_user(pool: str, user: User | None) -> bool:
    return pool != EXEMPT and (user is None or user.name not in CONTROL_PLANE_USERS)


class Seat:
    """One admitted request or watch; `release()` gives the seat back (once, whatever calls it)."""

    __slots__ = ("_owner", "key", "released", "user")

    def __init__(self, owner: InFlight, key: tuple[str, str], user: str) -> None:
        self._owner = owner
        self.key = key
        self.user = user
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._owner._give_back(self)


class InFlight:
    """The seats of every (pool, kind), and who holds them."""

    def __init__(self, limits: InFlightLimits | None = None) -> None:
        self.limits = limits or InFlightLimits()
        self._held: dict[tuple[str, str], Counter[str]] = {}
        self._total: Counter[tuple[str, str]] = Counter()

    def current(self, kind: str, pool: str = WORKLOAD) -> int:
        return self._total[(pool, kind)]

    def held_by(self, kind: str, user: User) -> int:
        holders = self._held.get((pool_of(user), kind))
        return holders[user.name] if holders else 0

    def share(self, kind: str, user: User | None) -> int:
        """The most seats of `kind` this user may hold right now."""
        pool = pool_of(user)
        limit = self.limits.of(kind)
        if not shared_per_user(pool, user):
            return limit
        holders = self._held.get((pool, kind), Counter())
        name = user.name if user is not None else ""
        others = len(holders) - (1 if name in holders else 0)
        return min(limit, max(self.limits.floor, limit // (others + 2)))

    def acquire(self, kind: str, user: User | None) -> Seat:
        """A seat of `kind` for `user`, or 429 TooManyRequests (Retry-After) naming the limit."""
        pool = pool_of(user)
        key = (pool, kind)
        limit = self.limits.of(kind)
        name = user.name if user is not None else ""
        if self._total[key] >= limit:
            raise errors.too_many_requests(
                f"too many {kind} requests in flight for {pool} users (limit {limit}), please try again later",
                RETRY_AFTER_SECONDS,
            )
        holders = self._held.setdefault(key, Counter())
        share = self.share(kind, user)
        if holders[name] >= share:
            raise errors.too_many_requests(
                f"too many {kind} requests in flight for user {name!r} (its fair share: {share} of {limit}),"
                " please try again later",
                RETRY_AFTER_SECONDS,
            )
        holders[name] += 1
        self._total[key] += 1
        return Seat(self, key, name)

    @contextlib.contextmanager
    def admit(self, kind: str, user: User | None) -> Iterator[Seat]:
        seat = self.acquire(kind, user)
        try:
            yield seat
        finally:
            seat.release()

    def _give_back(self, seat: Seat) -> None:
        holders = self._held[seat.key]
        holders[seat.user] -= 1
        if holders[seat.user] <= 0:
            del holders[seat.user]  # an idle user is no longer counted among the active
        self._total[seat.key] -= 1


def kind_of(method: str) -> str:
    return "write" if method in MUTATING else "read"
