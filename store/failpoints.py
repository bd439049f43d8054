"""Named failpoints: test-only places in the member where a fault can be injected.

A failpoint is a named spot in the code (`NAMES`); a chaos test gives it an action to make
the member crash or stall exactly there.  Production cost when nothing is enabled is one
module-attribute check per site:

    if failpoints.ENABLED:
        failpoints.hit("wal-after-fsync")

Enabling (both read once, at import):

* `RAFTKUBE_FAILPOINTS="wal-after-fsync=crash;apply-before=sleep(500)"`: `;`-separated
  `name=action` pairs; a bad part makes `check_env()` (called at member start) fail and
  name it.
* `RAFTKUBE_FAILPOINTS_HTTP=1`: the member's HTTP port serves `/debug/failpoints` so a
  harness can set points at runtime (see store/server/http.py); without it those paths 404.

Actions: `off`; `crash` (or `panic`): SIGKILL ourselves at once, nothing flushed, like a
power cut of the process; `sleep(ms)`: `time.sleep` on the calling thread - in the Raft
loop that stalls the whole member on purpose (a slow disk, a stuck process); `N*action`:
fire N times, then the point turns itself off.  The slow-fsync fault is
`wal-after-append=sleep(ms)`: data written, its fsync delayed.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from dataclasses import dataclass

ENV = "RAFTKUBE_FAILPOINTS"
HTTP_ENV = "RAFTKUBE_FAILPOINTS_HTTP"

NAMES: tuple[str, ...] = (
    "wal-before-append",
    "wal-after-append",
    "wal-after-fsync",
    "raft-before-send",
    "apply-before",
    "apply-after",
    "apply-before-applied-index",
    "compact-before",
    "compact-after",
    "snapshot-before-save",
    "snapshot-after-save",
    "snapshot-before-install",
    "snapshot-after-install",
    "watch-before-send",
    "conf-change-before-apply",
)

ENABLED = False
"""True when any point may fire: a point was set from the environment, or HTTP control is on."""
HTTP_ENABLED = False
"""True when `/debug/failpoints` is served (RAFTKUBE_FAILPOINTS_HTTP=1)."""


class FailpointError(ValueError):
    """A failpoint spec that cannot be used; the message names the bad part."""


class UnknownFailpointError(FailpointError):
    """A name not in NAMES."""


@dataclass(frozen=True, slots=True)
class Action:
    kind: str
    """off, crash or sleep ("panic" is parsed as crash)."""
    sleep_ms: int = 0
    count: int | None = None
    """Fires left before the point turns off; None: no limit."""

    def __str__(self) -> str:
        body = f"sleep({self.sleep_ms})" if self.kind == "sleep" else self.kind
        return body if self.count is None else f"{self.count}*{body}"


OFF = Action("off")
_ACTION = re.compile(r"^(?:(\d+)\*)?(off|crash|panic|sleep\((\d+)\))$")


def parse_action(text: str) -> Action:
    m = _ACTION.match(text.strip())
    if m is None:
        raise FailpointError(f"bad failpoint action {text!r}: expected off, crash, panic, sleep(MS) or N*ACTION")
    count = int(m.group(1)) if m.group(1) is not None else None
    if count == 0:
        raise FailpointError(f"bad failpoint action {text!r}: a count must be at least 1")
    body = m.group(2)
    if body.startswith("sleep"):
        return Action("sleep", int(m.group(3)), count)
    return Action("crash" if body == "panic" else body, 0, count)


def parse_spec(spec: str) -> dict[str, Action]:
    """`name=action;name=action` (empty parts ignored) -> {name: action}."""
    out: dict[str, Action] = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        name, sep, action = part.partition("=")
        name = name.strip()
        if not sep:
            raise FailpointError(f"bad failpoint {part.strip()!r} in {ENV}: expected name=action")
        _check_name(name)
        try:
            out[name] = parse_action(action)
        except FailpointError as e:
            raise FailpointError(f"failpoint {name!r} in {ENV}: {e}") from None
    return out


def _check_name(name: str) -> None:
    if name not in NAMES:
        raise UnknownFailpointError(f"unknown failpoint {name!r}; known: {', '.join(NAMES)}")


# ---------------------------------------------------------------- the registry
_lock = threading.Lock()
_actions: dict[str, Action] = {}
_hits: dict[str, int] = dict.fromkeys(NAMES, 0)
_env_error: str | None = None


def hit(name: str) -> None:
    """The code reached failpoint `name`: count it and run its action (if any).

    Called from the loop thread and the disk thread, hence the lock (never held while
    sleeping)."""
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        act = _actions.get(name)
        if act is None or act.kind == "off":
            return
        if act.count is not None:
            if act.count <= 1:
                del _actions[name]
            else:
                _actions[name] = Action(act.kind, act.sleep_ms, act.count - 1)
    if act.kind == "crash":
        # One unbuffered line for the test's evidence, then die: no flush, no cleanup.
        os.write(2, f"failpoint {name}: crash (SIGKILL)\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # SIGKILL is delivered before this returns; never run on
    elif act.kind == "sleep":
        time.sleep(act.sleep_ms / 1000)


def set_action(name: str, action: str | Action) -> Action:
    """Give `name` an action (parsed if a string); enables failpoints in this process."""
    global ENABLED  # noqa: PLW0603 - the module attribute is what call sites check
    _check_name(name)
    act = parse_action(action) if isinstance(action, str) else action
    with _lock:
        if act.kind == "off":
            _actions.pop(name, None)
        else:
            _actions[name] = act
        ENABLED = True
    return act


def clear(name: str) -> None:
    set_action(name, OFF)


def status() -> dict[str, dict[str, object]]:
    """Each known point: its action (as written in a spec) and how often it was reached."""
    with _lock:
        return {n: {"action": str(_actions.get(n, OFF)), "hits": _hits.get(n, 0)} for n in NAMES}


def configure(spec: str = "", http: bool = False) -> None:
    """Replace every action by `spec`'s (for tests in this process); hit counts restart."""
    global ENABLED, HTTP_ENABLED  # noqa: PLW0603
    actions = parse_spec(spec)
    with _lock:
        _actions.clear()
        _actions.update(actions)
        _hits.update(dict.fromkeys(NAMES, 0))
        HTTP_ENABLED = http
        ENABLED = http or bool(actions)


def check_env() -> None:
    """Raise FailpointError if the environment's spec was bad (a member refuses to start)."""
    if _env_error is not None:
        raise FailpointError(_env_error)


def _load_env() -> None:
    global _env_error  # noqa: PLW0603
    try:
        configure(os.environ.get(ENV, ""), http=os.environ.get(HTTP_ENV, "") not in ("", "0"))
    except FailpointError as e:
        _env_error = str(e)


_load_env()
