"""Revisions: `main` is the store revision of a write transaction, `sub` the change's position in it.

The store's revision starts at 1 (an empty store, as in etcd) and goes up by one for every
write transaction that changes something; changes within a transaction are ordered by
`sub`.  A NamedTuple so that revisions compare and sort as (main, sub) for free.
"""

from __future__ import annotations

from typing import NamedTuple

INITIAL_REVISION = 1
"""The revision of an empty store; the first write gets revision 2 (etcd's numbering)."""


class Revision(NamedTuple):
    main: int
    sub: int = 0

    def __str__(self) -> str:
        return f"{self.main}.{self.sub}"
