"""Watch guarantees, per watch stream, against the replay's events (etcd's watch validation).

ordered, unique, atomic, bookmarkable, reliable (no gap), resumable (starts where asked),
prev-kv, create-flag, compaction (a cancel only after a real compaction) and, across the
end-of-run full-history watchers, history-agree.
"""

from __future__ import annotations

from collections import defaultdict

from store.api.kv import Event, EventType
from store.chaos.check.common import short
from store.chaos.check.replay import Replay
from store.chaos.history import Violation, WatchRecord, WatchResponseSeen
from store.mvcc.keyrange import contains


def _v(check: str, w: WatchRecord, msg: str, at: float) -> Violation:
    what = f"watch {w.watcher} on {short(w.key)}{'..' + short(w.range_end) if w.range_end else ''}"
    return Violation(check, f"{what} from revision {w.start_revision}: {msg}", at=at)


def _ev(ev: Event) -> str:
    kind = "PUT" if ev.type is EventType.PUT else "DELETE"
    return f"{kind} {short(ev.kv.key)}={short(ev.kv.value)}@{ev.kv.mod_revision}"


def _same(a: Event, b: Event) -> bool:
    return a.type == b.type and a.kv == b.kv


def check_watch(w: WatchRecord, replay: Replay) -> list[Violation]:
    seen = [(r, ev) for r in w.responses for ev in r.events]
    out: list[Violation] = []
    out += _ordered_unique(w, seen)
    out += _atomic(w, seen)
    out += _bookmarkable(w)
    out += _reliable_resumable(w, seen, replay)
    out += _prev_kv_create(w, seen, replay)
    out += _compaction(w, replay)
    return out


def _ordered_unique(w: WatchRecord, seen: list[tuple[WatchResponseSeen, Event]]) -> list[Violation]:
    out = []
    last = 0
    keys: set[tuple[int, bytes]] = set()
    for r, ev in seen:
        rev = ev.kv.mod_revision
        if rev < last:
            out.append(_v("watch-ordered", w, f"{_ev(ev)} (at {r.at:.3f}) after an event of revision {last}", r.at))
        last = max(last, rev)
        if (rev, ev.kv.key) in keys:
            out.append(_v("watch-unique", w, f"{_ev(ev)} delivered twice (again at {r.at:.3f})", r.at))
        keys.add((rev, ev.kv.key))
    return out


def _atomic(w: WatchRecord, seen: list[tuple[WatchResponseSeen, Event]]) -> list[Violation]:
    where: dict[int, int] = {}
    out = []
    for r, ev in seen:
        rev = ev.kv.mod_revision
        first = where.setdefault(rev, id(r))
        if first != id(r):
            out.append(_v("watch-atomic", w, f"revision {rev} split across responses ({_ev(ev)} at {r.at:.3f})", r.at))
            where[rev] = id(r)
    return out


def _bookmarkable(w: WatchRecord) -> list[Violation]:
    out = []
    progress = 0
    last_event = 0
    for r in w.responses:
        if r.progress:
            if r.revision < progress:
                out.append(_v("watch-bookmarkable", w, f"progress went back from {progress} to {r.revision}", r.at))
            if r.revision < last_event:
                out.append(
                    _v("watch-bookmarkable", w, f"progress {r.revision} is below delivered event {last_event}", r.at)
                )
            progress = max(progress, r.revision)
        for ev in r.events:
            if ev.kv.mod_revision <= progress:
                out.append(
                    _v("watch-bookmarkable", w, f"{_ev(ev)} at {r.at:.3f} after progress notification {progress}", r.at)
                )
            last_event = max(last_event, ev.kv.mod_revision)
    return out


def _first_expected(w: WatchRecord) -> int:
    if w.start_revision > 0:
        return w.start_revision
    created = next((r for r in w.responses if r.created), None)
    return created.revision + 1 if created is not None else 0


def _reliable_resumable(w: WatchRecord, seen: list[tuple[WatchResponseSeen, Event]], replay: Replay) -> list[Violation]:
    first = _first_expected(w)
    out: list[Violation] = []
    if not first:
        return out
    events = [ev for _, ev in seen]
    last = max([ev.kv.mod_revision for ev in events] + [r.revision for r in w.responses if r.progress], default=0)
    if w.start_revision > 0 and events:
        want = replay.events_between(w.start_revision, replay.final_revision + 1, w.key, w.range_end)
        if not want or not _same(want[0], events[0]):
            wanted = _ev(want[0]) if want else "nothing"
            out.append(_v("watch-resumable", w, f"first event {_ev(events[0])}, expected {wanted}", seen[0][0].at))
            return out
    start = first if w.start_revision == 0 or not events else events[0].kv.mod_revision
    if last < start:
        return out
    expected = replay.events_between(start, last + 1, w.key, w.range_end)
    got = [ev for ev in events if ev.kv.mod_revision >= start]
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        if not _same(a, b):
            out.append(_v("watch-reliable", w, f"event #{i} is {_ev(a)}, the replay has {_ev(b)} there (a gap?)", 0.0))
            return out
    if len(got) != len(expected):
        longer, what = (got, "extra") if len(got) > len(expected) else (expected, "missing")
        out.append(
            _v(
                "watch-reliable",
                w,
                f"{what} events between revisions {start} and {last}: "
                f"first {_ev(longer[min(len(got), len(expected))])}",
                0.0,
            )
        )
    for r, ev in seen:
        if not contains(w.key, w.range_end, ev.kv.key):
            out.append(_v("watch-reliable", w, f"{_ev(ev)} is outside the watched range", r.at))
    return out


def _prev_kv_create(w: WatchRecord, seen: list[tuple[WatchResponseSeen, Event]], replay: Replay) -> list[Violation]:
    out = []
    for r, ev in seen:
        kv = ev.kv
        if ev.type is EventType.PUT and (kv.version == 1) != (kv.create_revision == kv.mod_revision):
            out.append(
                _v(
                    "watch-create-flag",
                    w,
                    f"{_ev(ev)} has version {kv.version} and create revision {kv.create_revision}",
                    r.at,
                )
            )
        if w.prev_kv:
            expected = replay.get(kv.key, kv.mod_revision - 1)
            if ev.prev_kv != expected:
                out.append(
                    _v(
                        "watch-prev-kv",
                        w,
                        f"{_ev(ev)} carries prev_kv {ev.prev_kv!r}, the replay has {expected!r} at revision "
                        f"{kv.mod_revision - 1}",
                        r.at,
                    )
                )
    return out


def _compaction(w: WatchRecord, replay: Replay) -> list[Violation]:
    out: list[Violation] = []
    for i, r in enumerate(w.responses):
        if not (r.canceled and r.compact_revision > 0):
            continue
        delivered = [ev.kv.mod_revision for x in w.responses[:i] for ev in x.events]
        needed = max(delivered) + 1 if delivered else w.start_revision
        done = [(rev, at) for rev, at in replay.compactions() if at <= r.at]
        if not any(rev >= needed for rev, _ in done):
            out.append(
                _v(
                    "watch-compaction",
                    w,
                    f"canceled at {r.at:.3f} as compacted at {r.compact_revision}, but it needed revision {needed} "
                    f"and the compactions applied by then reached only {max((c for c, _ in done), default=0)}",
                    r.at,
                )
            )
        if any(x.events for x in w.responses[i + 1 :]):
            out.append(_v("watch-compaction", w, f"events delivered after the compaction cancel at {r.at:.3f}", r.at))
    return out


def check_history_agree(watches: list[WatchRecord]) -> list[Violation]:
    """Full-history watchers of the same range see the same events for every revision both saw."""
    groups: dict[tuple[bytes, bytes], list[WatchRecord]] = defaultdict(list)
    for w in watches:
        if w.full_history_of:
            groups[(w.key, w.range_end)].append(w)
    out = []
    for ws in groups.values():
        by_rev = [_by_revision(w) for w in ws]
        for i in range(1, len(ws)):
            for rev in sorted(by_rev[0].keys() & by_rev[i].keys()):
                a, b = by_rev[0][rev], by_rev[i][rev]
                if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b, strict=True)):
                    out.append(
                        Violation(
                            "watch-history-agree",
                            f"revision {rev}: member {ws[0].full_history_of}'s history has "
                            f"{[_ev(e) for e in a]}, member {ws[i].full_history_of}'s has {[_ev(e) for e in b]}",
                        )
                    )
                    break
    return out


def _by_revision(w: WatchRecord) -> dict[int, list[Event]]:
    out: dict[int, list[Event]] = defaultdict(list)
    for r in w.responses:
        for ev in r.events:
            out[ev.kv.mod_revision].append(ev)
    return out
