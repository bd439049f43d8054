"""Putting a rendered table into the kernel, and taking it out: `nft -f -`, one transaction each.

`apply(ruleset)` replaces the whole table (`add table`, `delete table`, then its contents: the
kernel applies the lot or nothing, so no half-programmed table is ever live).  With
`previous` (the Ruleset last applied), the table is instead updated in place within one
transaction: every chain flushed, the maps and the nodeport set emptied, chains and affinity
sets no longer wanted deleted, then the contents declared again.  The affinity sets that stay
keep their elements, so unrelated Service changes do not forget which client sticks to which
endpoint, as kube-proxy's incremental syncs do not.

Errors are NftError with nft's own words; every call is bounded by `timeout`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence

from components.proxy.rules import TABLE_PREFIX, Ruleset

NFT = "nft"
TIMEOUT_S = 30.0
TABLE_RE = re.compile(re.escape(TABLE_PREFIX) + "[0-9a-f]{10}")
Prefix = Sequence[str]  # what runs nft, e.g. ("ip", "netns", "exec", NS) in tests


class NftError(Exception):
    """nft refused, failed or did not answer in time; the message says what it said."""


def run(script: str, *, check_only: bool = False, timeout: float = TIMEOUT_S, prefix: Prefix = ()) -> str:
    """`nft -f -` with `script` on stdin (`-c`: only check it); its output."""
    argv = [*prefix, NFT, *(["-c"] if check_only else []), "-f", "-"]
    try:
        done = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise NftError(f"nft did not finish within {timeout:g}s") from None
    except OSError as e:
        raise NftError(f"cannot run nft: {e}") from None
    if done.returncode != 0:
        raise NftError(f"nft failed (status {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def replace_script(ruleset: Ruleset) -> str:
    t = ruleset.table
    return f"add table ip {t}\ndelete table ip {t}\n{ruleset.text}"


def update_script(ruleset: Ruleset, previous: Ruleset) -> str:
    """The transaction taking a live `previous` to `ruleset` without dropping the table."""
    t = ruleset.table
    lines = [f"add table ip {t}", f"flush table ip {t}"]
    lines += [f"flush map ip {t} {m}" for m in sorted(previous.maps)]
    lines.append(f"flush set ip {t} nodeport-ips")
    lines += [f"delete chain ip {t} {c}" for c in sorted(previous.chains - ruleset.chains)]
    lines += [f"delete set ip {t} {s}" for s in sorted(previous.sets - ruleset.sets)]
    return "\n".join(lines) + "\n" + ruleset.text


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
    try:
        done = subprocess.run(
            [*prefix, NFT, "list", "tables"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise NftError(f"nft did not finish within {timeout:g}s") from None
    except OSError as e:
        raise NftError(f"cannot run nft: {e}") from None
    if done.returncode != 0:
        raise NftError(f"nft list tables failed: {done.stderr.strip()}")
    out = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table" and parts[1] == "ip" and parts[2].startswith(TABLE_PREFIX):
            out.append(parts[2])
    return sorted(out)
