"""The printed table, the JSON document (with machine and versions) and their assembly."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.store.peers import etcd36_version, etcd_version, pysyncobj_version
from bench.store.targets import ETCDS, Target


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 0
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "etcd": etcd_version(),
        "etcd36": etcd36_version(),
        "pysyncobj": pysyncobj_version(),
        "git_commit": git_commit(),
        "load_average_at_start": list(os.getloadavg()),
    }


def git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (sha or "unknown") + ("+dirty" if dirty else "")


def _f(v: float | None, fmt: str = ",.0f", unit: str = "") -> str:
    return "-" if v is None else f"{v:{fmt}}{unit}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or not b:
        return ""
    return f"{a / b:.2f}x"


def _etcds(systems: Any) -> list[str]:
    """The etcd releases a phase measured (in plaintext or with TLS): one ratio column each,
    raftkube's (and pysyncobj's) figure over that etcd's.  Never none: a run without etcd
    keeps an empty "vs etcd" column, as the table always had."""
    ran = [e for e in ETCDS if e in systems or f"{e}+tls" in systems]
    return ran or ["etcd"]


def _width(etcd: str, prefix: str = "vs ", least: int = 9) -> int:
    return max(least, len(prefix + etcd) + 2)


def _vs_header(etcds: list[str], prefix: str = "vs ", least: int = 9) -> str:
    """The heads of the ratio columns, one per etcd release measured."""
    return "".join(f"{prefix + e:>{_width(e, prefix, least)}}" for e in etcds)


def _vs(value: float | None, system: str, refs: dict[str, float | None]) -> str:
    """A ratio cell per etcd in `refs` (as `_vs_header` heads them): `value` over that etcd's
    figure; empty in an etcd's own rows."""
    own = system.removesuffix("+tls") in ETCDS
    return "".join(f"{_ratio(value, None if own else r):>{_width(e)}}" for e, r in refs.items())


def _pick(rows: list[dict[str, Any]], key: str, at: int, field: str) -> float | None:
    """`field` of the row whose `key` is `at` (None when there is none)."""
    row = next((x for x in rows if x[key] == at), None)
    return None if row is None else float(row[field])


def render(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    cfg = doc["config"]
    etcd36 = f", etcd36 {m['etcd36']}" if "etcd36" in cfg["systems"] else ""
    lines = [
        f"raftkube store benchmark: {cfg['members']} members per system on 127.0.0.1, fsync on "
        f"(pysyncobj: journal file, never fsynced){', QUICK' if cfg['quick'] else ''}",
        f"machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}, etcd {m['etcd']}{etcd36}, "
        f"pysyncobj {m['pysyncobj']}, commit {m['git_commit'][:12]}, load average at start "
        f"{m['load_average_at_start'][0]:.2f}",
        "client CPU = the load generator processes' own CPU over the window (100 % = one core: a saturated client)",
        {
            "both": "TLS: writes with and without mutual TLS (+tls rows), slow-watchers with it, other phases without",
            "on": "TLS: every phase with mutual TLS for raftkube and etcd (pysyncobj has none)",
            "off": "TLS: none (every phase in plaintext)",
        }.get(cfg.get("tls", "off"), ""),
    ]
    ph = doc["phases"]
    if "writes" in ph:
        w = ph["writes"]
        lines += ["", f"WRITES ({w['value_size']} B values, {w['seconds']:.0f} s per level, writers to the leader)"]
        systems = w["systems"]
        etcds = _etcds(systems)
        lines.append(
            f"{'in flight':>9}  {'system':<13}{'writes/s':>10}{_vs_header(etcds)}{'p50 ms':>9}{'p99 ms':>9}"
            f"{'client CPU':>12}{'server CPU':>12}{'CPU ms/write':>14}{'errors':>8}"
        )
        levels = sorted({r["concurrency"] for rows in systems.values() for r in rows})
        for level in levels:
            for s, rows in systems.items():
                r = next((x for x in rows if x["concurrency"] == level), None)
                if r is None:
                    continue
                # TLS rows are compared with that etcd with TLS, the others with it in plaintext.
                tls = "+tls" if s.endswith("+tls") else ""
                refs = {e: _pick(systems.get(e + tls, []), "concurrency", level, "ops_per_s") for e in etcds}
                lines.append(
                    f"{level:>9}  {s:<13}{r['ops_per_s']:>10,.0f}{_vs(r['ops_per_s'], s, refs)}"
                    f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.1f}{r['client_cpu_pct']:>11.0f}%"
                    f"{r['server_cpu_pct']:>11.0f}%{r['server_cpu_ms_per_op']:>14.3f}{r['errors']:>8}"
                )
        if "pysyncobj" in systems:
            lines.append(
                "pysyncobj runs with its default SyncObjConf: commands wait for its tick-driven batching "
                "(autoTickPeriod 50 ms), hence its ~100 ms latency floor and low server CPU"
            )
        if any("+tls" in s for s in systems):
            lines.append(
                "+tls: mutual TLS on client and peer ports (certificates from a cluster CA, EC P-256); "
                "its 'vs etcd' is against etcd+tls (and 'vs etcd36' against etcd36+tls)"
            )
        lines += _tls_lines(w)
    if "reads" in ph:
        rd = ph["reads"]
        lines += ["", f"READS ({rd['concurrency']} in flight, {rd['seconds']:.0f} s, to the leader)"]
        etcds = _etcds(rd["systems"])
        lines.append(
            f"{'system':<10}  {'kind':<28}{'reads/s':>10}{_vs_header(etcds)}{'p50 ms':>9}{'p99 ms':>9}"
            f"{'client CPU':>12}{'CPU ms/read':>13}"
        )
        for kind in ("linearizable", "serializable", "local"):
            for s, kinds in rd["systems"].items():
                r = kinds.get(kind)
                if r is None:
                    continue
                label = "local dict read (not linear.)" if kind == "local" else kind
                same = "serializable" if kind == "local" else kind
                refs = {e: rd["systems"].get(e, {}).get(same, {}).get("ops_per_s") for e in etcds}
                lines.append(
                    f"{s:<10}  {label:<28}{r['ops_per_s']:>10,.0f}{_vs(r['ops_per_s'], s, refs)}"
                    f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.1f}{r['client_cpu_pct']:>11.0f}%"
                    f"{r['server_cpu_ms_per_op']:>13.3f}"
                )
    if "watch" in ph:
        wa = ph["watch"]
        lines += [
            "",
            f"WATCH fan-out ({wa['seconds']:.0f} s, writers {wa['writers_in_flight']} in flight to the leader, "
            "watchers on a follower)",
        ]
        systems = wa["systems"]
        etcds = _etcds(systems)
        lines.append(
            f"{'watchers':>8}  {'system':<10}{'events/s':>11}{_vs_header(etcds)}{'writes/s':>10}{'delivered':>11}"
            f"{'watcher CPU':>13}{'writer CPU':>12}{'server CPU':>12}"
        )
        counts = sorted({r["watchers"] for v in systems.values() for r in v.get("fanout", [])})
        for n in counts:
            refs = {e: _pick(systems.get(e, {}).get("fanout", []), "watchers", n, "events_per_s") for e in etcds}
            for s, v in systems.items():
                r = next((x for x in v.get("fanout", []) if x["watchers"] == n), None)
                if r is None:
                    continue
                lines.append(
                    f"{n:>8}  {s:<10}{r['events_per_s']:>11,.0f}{_vs(r['events_per_s'], s, refs)}"
                    f"{r['writes_per_s']:>10,.0f}{100 * r['delivered_fraction']:>10.0f}%"
                    f"{r['watcher_client_cpu_pct']:>12.0f}%{r['writer_client_cpu_pct']:>11.0f}%"
                    f"{r['server_cpu_pct']:>11.0f}%"
                )
        lines += ["", "WATCH catch-up (one watcher from revision 1 on a follower, until the last event)"]
        speedup = "speed-up vs "
        lines.append(
            f"{'system':<10}{'events':>10}{'seconds':>10}{'events/s':>11}{_vs_header(etcds, speedup, 18)}"
            f"{'client CPU':>12}"
        )
        for s, v in systems.items():
            c = v.get("catchup")
            if c is None:
                continue
            speed = ""
            for e in etcds:
                et = systems.get(e, {}).get("catchup")
                cell = f"{et['seconds'] / c['seconds']:.1f}x" if et and c["seconds"] and s not in ETCDS else ""
                speed += f"{cell:>{_width(e, speedup, 18)}}"
            done = "" if c["complete"] else f" (incomplete: {c['events']:,} of {c['expected']:,})"
            lines.append(
                f"{s:<10}{c['events']:>10,}{c['seconds']:>10.2f}{c['events_per_s']:>11,.0f}{speed}"
                f"{c['client_cpu_pct']:>11.0f}%{done}"
            )
    if "failover" in ph:
        fo = ph["failover"]
        lines += [
            "",
            f"FAILOVER (SIGKILL the leader under load, {fo['in_flight']} writes in flight; "
            "time from the kill to the first successful write started after it; "
            f"{fo.get('request_timeout_s', 1.0):.1f} s deadline per write)",
        ]
        lines.append(
            f"{'system':<10}{'kills':>6}{'median s':>10}{'max s':>8}{'leader seen s':>15}{'client CPU':>12}"
            "  per kill (s)"
        )
        for s, r in fo["systems"].items():
            each = " ".join(_f(k["unavailable_s"], ".2f") for k in r["kills"])
            seen = statistics.median([k["leader_seen_s"] for k in r["kills"]]) if r["kills"] else None
            lines.append(
                f"{s:<10}{len(r['kills']):>6}{_f(r['median_s'], '.2f'):>10}{_f(r['max_s'], '.2f'):>8}"
                f"{_f(seen, '.2f'):>15}{r['client_cpu_pct']:>11.0f}%  {each}"
            )
        lines.append("(leader seen = median time until the driver's status polls, every ~50 ms, found a new leader)")
    if "restart" in ph:
        rs = ph["restart"]
        lines += [
            "",
            f"RESTART (a follower holding {rs['keys']:,} keys x {rs['value_size']} B: SIGKILL, restart, "
            "time until a serializable read of the last key is right)",
        ]
        etcds = _etcds(rs["systems"])
        lines.append(
            f"{'system':<10}{'restart s':>10}{_vs_header(etcds)}{'RSS MiB per member':>28}{'RSS after':>11}"
            f"{'fill writes/s':>15}{'CPU ms/write':>14}{'port wait s':>13}"
        )
        refs = {e: rs["systems"].get(e, {}).get("restart_s") for e in etcds}
        for s, r in rs["systems"].items():
            rss = " ".join(f"{v:.0f}" for v in r["rss_mib"].values())
            lines.append(
                f"{s:<10}{r['restart_s']:>10.2f}{_vs(r['restart_s'], s, refs)}"
                f"{rss:>28}{r['rss_restarted_mib']:>11.0f}{r['fill_writes_per_s']:>15,.0f}"
                f"{r['fill_server_cpu_ms_per_write']:>14.3f}{r.get('port_wait_s', 0.0):>13.2f}"
            )
        lines.append("(port wait = time after the SIGKILL until the kernel let its ports be bound again; not counted)")
    if "slow-watchers" in ph:
        lines += _slow_watcher_lines(ph["slow-watchers"])
    lines += ["", "TARGETS (raftkube, ratios to peers measured in this run)"]
    lines.append(f"{'target':<58}{'goal':>10}{'measured':>12}  met")
    for t in doc["targets"]:
        unit = f" {t['unit']}" if t["unit"] in ("s", "ms", "MiB", "%") else t["unit"]
        value = "-" if t["value"] is None else f"{t['value']:.2f}{unit}"
        met = "n/a (not measured)" if t["met"] is None else ("yes" if t["met"] else "NO")
        lines.append(f"{t['name']:<58}{t['goal']:>10}{value:>12}  {met}")
    return "\n".join(lines)


def _tls_lines(w: dict[str, Any]) -> list[str]:
    """What TLS costs each system, level by level, and raftkube with TLS against etcd with TLS."""
    cost = w.get("tls") or {}
    if not cost:
        return []
    lines = [
        "",
        "TLS COST (same run: writes/s without and with mutual TLS; cost = throughput lost, in % of plaintext)",
        f"{'in flight':>9}  {'system':<10}{'plain w/s':>11}{'TLS w/s':>10}{'cost':>8}{'p99 plain':>11}{'p99 TLS':>9}"
        f"{'CPU ms/write plain':>20}{'TLS':>7}",
    ]
    levels = sorted({r["concurrency"] for rows in cost.values() for r in rows})
    for level in levels:
        for s, rows in cost.items():
            r = next((x for x in rows if x["concurrency"] == level), None)
            if r is None:
                continue
            lines.append(
                f"{level:>9}  {s:<10}{r['plain_ops_per_s']:>11,.0f}{r['tls_ops_per_s']:>10,.0f}"
                f"{r['cost_pct']:>7.1f}%{r['plain_p99_ms']:>11.1f}{r['tls_p99_ms']:>9.1f}"
                f"{r['plain_server_cpu_ms_per_op']:>20.3f}{r['tls_server_cpu_ms_per_op']:>7.3f}"
            )
    rk = cost.get("raftkube")
    for etcd in ETCDS:
        et = cost.get(etcd)
        if not (rk and et):
            continue
        ratios = []
        for r in rk:
            e = next((x for x in et if x["concurrency"] == r["concurrency"]), None)
            if e is not None and e["tls_ops_per_s"]:
                ratios.append(f"{r['tls_ops_per_s'] / e['tls_ops_per_s']:.2f}x at {r['concurrency']}")
        lines.append(f"raftkube+tls / {etcd}+tls writes/s: {', '.join(ratios)}")
    return lines


def _slow_watcher_lines(sw: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"SLOW WATCHERS (raftkube{' with TLS' if sw['tls'] else ''}: {sw['watchers']:,} watchers on a prefix on a "
        f"follower, {sw['stalled']} of them on connections that never read; writers {sw['writers_in_flight']} in "
        f"flight to the leader.  The never-reading ones back up alone for {sw['backup_s']:.0f} s, then the "
        f"{sw['reading']} others join; counted for {sw['seconds']:.0f} s after {sw['warmup_s']:.0f} s.  "
        f"{sw['rounds']} pair(s) of runs, each on a fresh cluster)",
        f"{'run':<24}{'on member':>10}{'events/s':>11}{'per CPU s':>11}{'writes/s':>10}{'delivered':>11}"
        f"{'RSS idle':>10}{'at join':>9}{'peak':>7}{'end':>6}{'member CPU':>12}{'watcher CPU':>13}{'cut off':>9}",
    ]
    for r in sw["runs"]:
        name = f"{r['reading']} reading" + (f" + {r['stalled']} never" if r["stalled"] else "")
        seen = "-" if r["watchers_on_member"] is None else f"{r['watchers_on_member']:,.0f}"
        cut = "-" if r["cut_off_connections"] is None else f"{r['cut_off_connections']:.0f}"
        lines.append(
            f"{name:<24}{seen:>10}{r['events_per_s']:>11,.0f}{r['events_per_member_cpu_s']:>11,.0f}"
            f"{r['writes_per_s']:>10,.0f}{100 * r['delivered_fraction']:>10.1f}%{r['rss_idle_mib']:>10.0f}"
            f"{r['rss_at_join_mib']:>9.0f}{r['rss_peak_mib']:>7.0f}{r['rss_end_mib']:>6.0f}"
            f"{r['member_cpu_pct']:>11.0f}%{r['watcher_client_cpu_pct']:>12.0f}%{cut:>9}"
        )
    for r in sw["runs"]:
        applied, behind = r.get("member_applied_per_s"), r.get("member_behind_at_end")
        if applied is not None:
            name = f"{r['reading']} reading" + (f" + {r['stalled']} never" if r["stalled"] else "")
            lines.append(
                f"round {r['round']}, {name}: the watched member applied {applied:,.0f} revisions/s in the window "
                f"(leader: {r['writes_per_s']:,.0f} writes/s)"
                + ("" if behind is None else f", {behind:,.0f} revisions behind the leader at the end")
            )
    for r in sw["runs"]:
        if r["stalled"]:
            join = sorted(r["stalled_member_send_queue_at_join"])
            end = sorted(r["stalled_member_send_queue_at_end"])
            unread = sorted(r["stalled_unread_at_end"])
            lines.append(
                f"round {r['round']}, never-reading connections (median KiB): member's kernel send queue "
                f"{_median_kib(join)} when the others joined, {_median_kib(end)} at the end; unread in the "
                f"client's receive queue {_median_kib(unread)} at the end"
            )
    lines.append(
        f"RSS with the never-reading watchers minus without (median of pairs): {sw['rss_extra_at_join_mib']:+.0f} MiB "
        f"when the others joined, {sw['rss_extra_peak_mib']:+.0f} MiB at the peak (both runs grow with the "
        "store's uncompacted history)"
    )
    if sw["delivery_ratio"] is not None:
        per_cpu = sw.get("delivery_per_cpu_ratio")
        lines.append(
            f"median delivery to the reading watchers with the never-reading ones: {100 * sw['delivery_ratio']:.0f} %"
            f" of without" + (f" ({100 * per_cpu:.0f} % per member CPU-second)" if per_cpu else "")
        )
    lines.append(
        "(RSS in MiB: VmRSS of the watched member; on member = its raftkube_watchers gauge in the window; "
        "delivered = events/s over writes/s x reading watchers; cut off = connections it aborted for not reading)"
    )
    return lines


def _median_kib(values: list[int]) -> str:
    return f"{values[len(values) // 2] / 1024:,.0f}" if values else "-"


def document(
    config: dict[str, Any], machine_info: dict[str, Any], phases: dict[str, Any], targets: list[Target]
) -> dict[str, Any]:
    return {
        "benchmark": "store",
        "machine": machine_info,
        "config": config,
        "phases": phases,
        "targets": [t.to_json() for t in targets],
    }
