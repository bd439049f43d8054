"""Putting a rendered table into the kernel, and taking it out: `nft -f -`, one transaction each.

`apply(ruleset)` replaces the whole table (`add table`, `delete table`, then its contents: the
kernel applies the lot or nothing, so no half-programmed table is ever live).  With
`previous` (the Ruleset last applied), the table is instead updated in place, in one
transaction too, by difference: only the chains and map elements that changed are written
(as kube-proxy's partial syncs).  That is what keeps a sync of 1,000 Services fast (a change
to one Service is a few lines for nft, ~30 ms, where the whole table is ~0.6 s), and the
affinity sets that stay keep their elements, so unrelated Service changes do not forget which
client sticks to which endpoint.

Errors are NftError with nft's own words (machinery.process.nft runs it); every call is
bounded by `timeout`.
"""

from __future__ import annotations

import re

from components.proxy.rules import TABLE_PREFIX, Ruleset, affinity_set_spec
from machinery.process.nft import TIMEOUT_S, NftError, Prefix, run

TABLE_RE = re.compile(re.escape(TABLE_PREFIX) + "[0-9a-f]{10}")

__all__ = ["NftError", "Prefix", "apply", "check", "remove", "run", "tables"]


def replace_script(ruleset: Ruleset) -> str:
    t = ruleset.table
    return f"add table ip {t}\ndelete table ip {t}\n{ruleset.text}"


def update_script(ruleset: Ruleset, previous: Ruleset) -> str:
    """The transaction taking a live `previous` to `ruleset` by difference: new affinity sets
    and chains first (rules and map elements may name them), changed chains rewritten, map
    elements deleted and added, then what is no longer wanted flushed and deleted."""
    t = ruleset.table
    new, old = ruleset.chains, previous.chains
    lines = [f"add table ip {t}"]
    sets = ruleset.sets.items()
    lines += [f"add set ip {t} {s} {{ {affinity_set_spec(v)} }}" for s, v in sets if s not in previous.sets]
    lines += [f"add chain ip {t} {c}" for c in new if c not in old]
    for c, rules in new.items():
        if old.get(c) != rules:
            if c in old:
                lines.append(f"flush chain ip {t} {c}")
            lines += [f"add rule ip {t} {c} {r}" for r in rules]
    for m, elements in ruleset.maps.items():
        held = previous.maps.get(m, {})
        lines += [f"delete element ip {t} {m} {{ {k} }}" for k, v in held.items() if elements.get(k) != v]
        lines += [f"add element ip {t} {m} {{ {k} : {v} }}" for k, v in elements.items() if held.get(k) != v]
    if ruleset.nodeport_ips != previous.nodeport_ips:
        lines.append(f"flush set ip {t} nodeport-ips")
        if ruleset.nodeport_ips:
            lines.append(f"add element ip {t} nodeport-ips {{ {', '.join(ruleset.nodeport_ips)} }}")
    gone, added = (
        set(previous.cluster_ips) - set(ruleset.cluster_ips),
        set(ruleset.cluster_ips) - set(previous.cluster_ips),
    )
    lines += [f"delete element ip {t} cluster-ips {{ {ip} }}" for ip in sorted(gone)]
    lines += [f"add element ip {t} cluster-ips {{ {ip} }}" for ip in sorted(added)]
    stale = [c for c in old if c not in new]
    lines += [f"flush chain ip {t} {c}" for c in stale]
    lines += [f"delete chain ip {t} {c}" for c in stale]
    lines += [f"delete set ip {t} {s}" for s in previous.sets if s not in ruleset.sets]
    return "\n".join(lines) + "\n"


def apply(
    ruleset: Ruleset, previous: Ruleset | None = None, *, timeout: float = TIMEOUT_S, prefix: Prefix = ()
) -> None:
    """Make `ruleset` the live table: in place over `previous` when given (and same table)."""
    if previous is not None and previous.table == ruleset.table:
        run(update_script(ruleset, previous), timeout=timeout, prefix=prefix)
    else:
        run(replace_script(ruleset), timeout=timeout, prefix=prefix)


def check(ruleset: Ruleset, *, timeout: float = TIMEOUT_S, prefix: Prefix = ()) -> None:
    """NftError unless nft would accept the table (nothing is changed)."""
    run(replace_script(ruleset), check_only=True, timeout=timeout, prefix=prefix)


def remove(table: str, *, timeout: float = TIMEOUT_S, prefix: Prefix = ()) -> None:
    """The table gone (and no error if it was not there)."""
    if not TABLE_RE.fullmatch(table):
        raise ValueError(f"{table!r} is not a proxy table")
    run(f"add table ip {table}\ndelete table ip {table}\n", timeout=timeout, prefix=prefix)


def tables(*, timeout: float = TIMEOUT_S, prefix: Prefix = ()) -> list[str]:
    """Our tables (`rk-proxy-…`, family ip) in this network namespace."""
    listing = run("list tables\n", timeout=timeout, prefix=prefix)
    out = []
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table" and parts[1] == "ip" and parts[2].startswith(TABLE_PREFIX):
            out.append(parts[2])
    return sorted(out)
