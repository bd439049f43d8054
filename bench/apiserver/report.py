"""The printed table and the JSON document (machine, load average, versions, phases, targets)."""

from __future__ import annotations

import os
from typing import Any

from bench.apiserver.backends import versions
from bench.apiserver.phases.custom import ratios
from bench.store.report import machine as store_machine
from bench.store.targets import Target


def machine() -> dict[str, Any]:
    m = store_machine()
    m.pop("pysyncobj", None)
    return m | {"packages": versions()}


def document(
    config: dict[str, Any], machine_info: dict[str, Any], phases: dict[str, Any], targets: list[Target]
) -> dict[str, Any]:
    machine_info = machine_info | {"load_average_at_end": list(os.getloadavg())}
    return {
        "benchmark": "apiserver",
        "machine": machine_info,
        "config": config,
        "phases": phases,
        "targets": [t.to_json() for t in targets],
    }


def _cpu_per_create(row: dict[str, Any], role: str) -> str:
    value = row.get("cpu_ms_per_create", {}).get(role)
    return "-" if value is None else f"{value:.2f}"


def _cpu(r: dict[str, Any]) -> str:
    return f"{r['apiserver_cpu_pct']:>8.0f}%{r['store_cpu_pct']:>9.0f}%"


PER_BACKEND = ("fanout", "throughput", "lists", "creates", "custom", "gates", "memory")
"""The phases whose figures are keyed by backend (the client phase is measured once)."""


def _backend_width(ph: dict[str, Any]) -> int:
    """The backend column's width: the longest backend name and a space ("kube-apiserver" ran
    into the next column when it was a fixed 10)."""
    names = [b for phase in PER_BACKEND for b in ph.get(phase, {})]
    return 1 + max([len("backend"), *map(len, names)])


def render(doc: dict[str, Any]) -> str:
    m, cfg, ph = doc["machine"], doc["config"], doc["phases"]
    bw = _backend_width(ph)
    s = cfg["sizes"]
    pk = m["packages"]
    lines = [
        "raftkube apiserver benchmark: one apiserver process (uvicorn, 1 worker, HTTPS) per storage backend; "
        "load generators in processes of their own, HTTP/1.1 keep-alive, admin bearer token"
        + (", QUICK" if cfg["quick"] else ""),
        f"machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}, etcd {m['etcd']}, "
        f"uvicorn {pk['uvicorn']}, commit {m['git_commit'][:12]}; load average at start "
        f"{' '.join(f'{x:.2f}' for x in m['load_average_at_start'])}, at end "
        f"{' '.join(f'{x:.2f}' for x in m['load_average_at_end'])}",
        "stores: raftkube = 3 members, fsync on; etcd = 3 members (its default fsync); "
        "plaintext between apiserver and store",
        "api CPU / store CPU = the apiserver process / all store members over the measured window (100 % = one core)",
    ]
    if "client" in ph:
        c = ph["client"]
        raw, hx = c["clients"]["raw_asyncio"], c["clients"]["httpx"]
        cheaper = (
            "raw asyncio streams" if raw["client_cpu_ms_per_request"] <= hx["client_cpu_ms_per_request"] else "httpx"
        )
        lines += [
            "",
            f"HTTP CLIENT of the load generators (GET {c['path']}, {c['connections']} connections, "
            f"over {c['backend']})",
            f"  raw asyncio TLS streams: {raw['client_cpu_ms_per_request']:.3f} ms client CPU/request "
            f"({raw['requests_per_s']:,.0f} req/s); httpx AsyncClient: {hx['client_cpu_ms_per_request']:.3f} ms "
            f"({hx['requests_per_s']:,.0f} req/s): httpx costs {c['httpx_over_raw_cpu']:.1f}x; "
            f"the phases use {cheaper}",
        ]
    if "fanout" in ph:
        lines += [
            "",
            f"(a) WATCH FAN-OUT ({s['fanout_nodes']:,} watchers with fieldSelector=spec.nodeName=node-i + "
            f"{s['fanout_unfiltered']} unfiltered; {s['fanout_pods']:,} pods created at {s['fanout_rate']:.0f}/s, "
            "each on a node; latency = receipt - the writer's stamp)",
            f"{'backend':<{bw}}{'creates/s':>10}{'delivered':>12}{'expected':>10}{'missing':>9}{'complete':>10}"
            f"{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'open s':>8}{'api CPU':>9}{'store CPU':>10}{'api RSS':>9}",
        ]
        for b, r in ph["fanout"].items():
            lines.append(
                f"{b:<{bw}}{r['writes_per_s']:>10,.0f}{r['events_delivered']:>12,}{r['events_expected']:>10,}"
                f"{r['events_missing']:>9,}{r['watchers_complete']:>6,}/{r['watchers']:<,}"
                f"{r['p50_ms']:>7.0f}{r['p99_ms']:>8.0f}{r['max_ms']:>8.0f}{r['watch_open_s']:>8.1f}{_cpu(r)}"
                f"{r['apiserver_rss_mib']:>6.0f}MiB"
            )
            nl, ul = r["node_watchers_latency"], r["unfiltered_watchers_latency"]
            lines.append(
                f"  {b}: p50/p99 ms to the node watchers {nl['p50_ms']:.0f}/{nl['p99_ms']:.0f}, to the unfiltered "
                f"{ul['p50_ms']:.0f}/{ul['p99_ms']:.0f}; create p99 {r['create']['p99_ms']:.0f} ms; "
                f"last event {r['drain_s']:.1f} s after the last create"
            )
            if r["create_errors"]:
                lines.append(f"  {b}: {r['create_errors']} creates failed, the first: {r['first_error'][:120]}")
            if r["watch_failures"]:
                lines.append(
                    f"  {b}: {r['watchers_failed']} watches ended early, the first: {r['watch_failures'][0][:160]}"
                )
    if "throughput" in ph:
        lines += [
            "",
            f"(b) WATCH THROUGHPUT ({s['throughput_watchers']} unfiltered watchers, creates with "
            f"{s['writers_in_flight']} in flight, {s['throughput_s']:.0f} s)",
            f"{'backend':<{bw}}{'events/s':>10}{'creates/s':>11}{'delivered':>11}{'cut off':>9}{'create p99':>12}"
            f"{'api CPU':>9}{'store CPU':>10}{'watcher CPU':>13}{'writer CPU':>12}",
        ]
        for b, r in ph["throughput"].items():
            lines.append(
                f"{b:<{bw}}{r['events_per_s']:>10,.0f}{r['writes_per_s']:>11,.0f}"
                f"{100 * r['delivered_fraction']:>10.0f}%"
                f"{r['watchers_failed']:>9}{r['create']['p99_ms']:>10.0f}ms{_cpu(r)}{r['watcher_client_cpu_pct']:>12.0f}%"
                f"{r['writer_client_cpu_pct']:>11.0f}%"
            )
            if r["watch_failures"]:
                lines.append(f"  {b}: first watch ended early: {r['watch_failures'][0][:160]}")
    if "lists" in ph:
        lines += [
            "",
            f"(c) LIST of every pod ({s['list_requests']} requests per kind, one at a time; cache = resourceVersion=0, "
            "consistent = unset)",
            f"{'backend':<{bw}}{'kind':<12}{'items':>8}{'MiB':>7}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
            f"{'api CPU ms/LIST':>17}{'errors':>8}",
        ]
        for b, r in ph["lists"].items():
            for kind in ("cache", "consistent"):
                k = r[kind]
                lines.append(
                    f"{b:<{bw}}{kind:<12}{k['items']:>8,}{k['bytes'] / 2**20:>7.1f}{k['p50_ms']:>8.0f}"
                    f"{k['p99_ms']:>8.0f}{k['max_ms']:>8.0f}{k['apiserver_cpu_ms_per_list']:>17.0f}{k['errors']:>8}"
                )
    if "creates" in ph:
        lines += [
            "",
            f"(d) POD CREATES ({s['writers_in_flight']} in flight over {s['clients']} processes, "
            f"{s['create_s']:.0f} s)",
            f"{'backend':<{bw}}{'creates/s':>10}{'vs etcd':>9}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
            f"{'api CPU':>9}{'store CPU':>10}{'api ms/create':>15}{'client CPU':>12}{'errors':>8}",
        ]
        et = ph["creates"].get("etcd")
        for b, r in ph["creates"].items():
            vs = (
                f"{r['creates_per_s'] / et['creates_per_s']:.2f}x" if et and b != "etcd" and et["creates_per_s"] else ""
            )
            lines.append(
                f"{b:<{bw}}{r['creates_per_s']:>10,.0f}{vs:>9}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.0f}{r['max_ms']:>8.0f}"
                f"{_cpu(r)}{r['apiserver_cpu_ms_per_create']:>15.2f}{r['client_cpu_pct']:>11.0f}%{r['errors']:>8}"
            )
    if "custom" in ph:
        lines += [
            "",
            f"(f) CUSTOM RESOURCES (a CRD's widgets, shaped like the pods: creates as in (d), "
            f"{s['throughput_watchers']} unfiltered watchers as in (b))",
            f"{'backend':<{bw}}{'creates/s':>10}{'vs pods':>9}{'p99 ms':>8}{'events/s':>10}{'vs pods':>9}{'errors':>8}",
        ]
        for b, r in ph["custom"].items():
            ratio = ratios(ph, b)
            shown = [f"{v:.2f}x" if v is not None else "-" for v in (ratio["creates_per_s"], ratio["events_per_s"])]
            c, t = r["creates"], r["throughput"]
            lines.append(
                f"{b:<{bw}}{c['creates_per_s']:>10,.0f}{shown[0]:>9}{c['p99_ms']:>8.0f}{t['events_per_s']:>10,.0f}"
                f"{shown[1]:>9}{c['errors'] + t['create_errors']:>8}"
            )
    if "gates" in ph:
        for b, g in ph["gates"].items():
            lines += [
                "",
                f"(e) THE GATES ({b} store; two fresh apiservers: off = AlwaysAllow and no admission, admin; "
                "on = Node,RBAC and every admission plugin, a service account bound to edit, quota + "
                "LimitRange + PodSecurity baseline; hook = on + one validating webhook)",
                "CPU ms/create: of the serving apiserver, the webhook, the two other apiservers (their"
                " watch caches decode every pod) and the store members, over the measured window;"
                " writes/create: what the store took per create (above 1: the quota's charges)",
                f"{'chain':<8}{'in flight':>10}{'creates/s':>11}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'errors':>8}"
                f"{'apiserver':>11}{'webhook':>9}{'others':>8}{'store':>7}{'writes/create':>15}",
            ]
            for key, r in g["rows"].items():
                chain, _, _ = key.partition("@")
                lines.append(
                    f"{chain:<8}{r['in_flight']:>10}{r['creates_per_s']:>11,.0f}{r['p50_ms']:>8.2f}"
                    f"{r['p99_ms']:>8.1f}{r['max_ms']:>8.0f}{r['errors']:>8}{_cpu_per_create(r, 'apiserver'):>11}"
                    f"{_cpu_per_create(r, 'webhook'):>9}{_cpu_per_create(r, 'other apiservers'):>8}"
                    f"{_cpu_per_create(r, 'store'):>7}{r.get('store_writes_per_create', float('nan')):>15.3f}"
                )
                if r["errors"]:
                    lines.append(f"  first error: {r['first_error'][:160]}")
            lines.append(
                f"  the gates cost {100 * g['gates_cost']:.0f} % of create throughput; "
                f"the webhook adds {g['webhook_p50_ms']:.2f} ms at p50 (1 in flight, on and hook in turns: "
                f"p50 {g['paired']['on']['p50_ms']:.2f} and {g['paired']['hook']['p50_ms']:.2f} ms; "
                f"{g['webhook_p50_ms_separate_rounds']:.2f} ms between separate rounds)"
            )
    if "memory" in ph:
        lines += [
            "",
            "(g) MEMORY (the apiserver's RSS as the cluster is topped up; bytes per cached pod = RSS growth"
            " since the phase's start / pods added)",
            f"{'backend':<{bw}}{'pods':>9}{'added':>9}{'RSS MiB':>9}{'B/pod':>9}{'fill s':>8}",
        ]
        for b, r in ph["memory"].items():
            lines.append(f"{b:<{bw}}{r['start_pods']:>9,}{0:>9,}{r['start_rss_mib']:>9.0f}{'-':>9}{'-':>8}")
            for st in r["steps"]:
                lines.append(
                    f"{'':<{bw}}{st['pods']:>9,}{st['added']:>9,}{st['rss_mib']:>9.0f}{st['bytes_per_pod']:>9,.0f}"
                    f"{st['fill_s']:>8.0f}"
                )
    lines += ["", "TARGETS", f"{'target':<60}{'goal':>12}{'measured':>14}  met"]
    for t in doc["targets"]:
        unit = t["unit"]
        if t["value"] is None:
            value = "-"
        elif unit == "/s":
            value = f"{t['value']:,.0f}/s"
        elif unit == "x":
            value = f"{t['value']:.2f}x"
        else:
            value = f"{t['value']:.1f} {unit}" if unit else f"{t['value']:.2f}"
        met = "n/a (not measured)" if t["met"] is None else ("yes" if t["met"] else "NO")
        lines.append(f"{t['name']:<60}{t['goal']:>12}{value:>14}  {met}")
    lines += _profiles(ph)
    return "\n".join(lines)


def _profiles(ph: dict[str, Any]) -> list[str]:
    found = []
    for phase, per in ph.items():
        if not isinstance(per, dict):
            continue
        for b, r in per.items():
            if not isinstance(r, dict):
                continue
            for key, sub in [("", r), *((k, v) for k, v in r.items() if isinstance(v, dict))]:
                prof = sub.get("profile") if isinstance(sub, dict) else None
                if prof and "self" in prof:
                    found.append((f"{b} {phase}{' ' + key if key else ''}", prof))
    if not found:
        return []
    lines = ["", "APISERVER PROFILES (py-spy; busy = samples / (rate x seconds); top frames by share of samples)"]
    for name, prof in found:
        lines.append(f"{name}: busy {prof['busy_pct']:.0f} %, {prof['samples']:,} samples, {prof['file']}")
        lines.append("  self:      " + "; ".join(f"{f['frame']} {f['pct']:.0f}%" for f in prof["self"][:6]))
        lines.append("  inclusive: " + "; ".join(f"{f['frame']} {f['pct']:.0f}%" for f in prof["inclusive"][:6]))
    return lines
