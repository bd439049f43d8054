"""Running nftables' `nft -f -`: one script, one kernel transaction, bounded in time, its
refusal in nft's own words.  The service proxy (components.proxy.nft) and the kubelet's host
ports (components.kubelet.hostports) both program tables through it."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

NFT = "nft"
TIMEOUT_S = 30.0
MAX_ERROR = 2000
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
        said = done.stderr.strip() or done.stdout.strip()
        if len(said) > MAX_ERROR:  # one error per rule of a big table: the first ones say enough
            said = said[:MAX_ERROR] + f"... ({len(said) - MAX_ERROR} more characters)"
        raise NftError(f"nft failed (status {done.returncode}): {said}")
    return done.stdout
