"""(e) The gates' cost: pod creates with the whole chain on against the chain off, same run.

Two fresh apiservers over the backend's store, started side by side for this phase:
  off   `--authorization-mode AlwaysAllow --disable-admission-plugins <every plugin>`, admin token
  on    the defaults (Node,RBAC and every admission plugin), as a service account bound to
        `edit`, in namespaces with a ResourceQuota (pods, cpu and memory), a LimitRange
        (defaults and a max) and PodSecurity `enforce: baseline`; the `hook` namespace is also
        matched by one validating webhook (HTTPS, allow-all, its own process and CA)
Closed-loop creates at 64 in flight give creates/s (the gates' cost, target <= 25 % without
the webhook); at 1 in flight, p50 latency.
Each level runs its chains in mirrored order (off, on, hook, hook, on, off), and a row sums
both of its rounds: a chain measured only first or only last would take with it whatever
drifts over the phase (the store growing by every create, the machine's other load).
Rounds still differ by more than a webhook costs (a 1-in-flight round's p50 moves by
milliseconds with the store's fsyncs), so the webhook's added p50 (target <= 2 ms) comes from
paired rounds: one client, one create in flight, taking the `on` and `hook` namespaces in
turns, so that both chains share every drift.  Each round also records the CPU seconds the
serving apiserver (and the webhook) spent per create.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from apiserver.admission.assembly import PLUGINS
from apiserver.launcher import Endpoint, LocalApiserver
from bench.apiserver.backends import Backend, BackendError, _request
from bench.apiserver.context import LOADGEN, Context, latency_ms
from bench.apiserver.http11 import Target
from bench.apiserver.phases.fanout import split
from bench.store import procs
from bench.store.loadrun import LoadProcess, server_cpu, start_together, wait_until
from machinery.process import pki
from machinery.process.launch import free_ports

NAMESPACES = {"off": "gates-off", "on": "gates-on", "hook": "gates-hook"}
HOOK_LABEL = "raftkube.io/bench-webhook"


def _wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise BackendError(f"the bench webhook did not listen on {port} within {timeout:.0f} s")


def _start_apiserver(ctx: Context, backend: Backend, name: str, extra: tuple[str, ...]) -> tuple[int, Target]:
    server = LocalApiserver(ctx.root / f"{backend.name}-gates-{name}")
    endpoint = Endpoint("127.0.0.1", free_ports(1)[0], backend.endpoint.storage)
    # compaction stays with the backend's own apiserver
    pid = server.start(endpoint, insecure_store=True, extra_args=extra)
    procs.track(pid)
    server.wait_ready(endpoint, 60.0)
    token = server.pki.admin_token()
    if token is None:
        raise BackendError(f"no admin token in {server.pki.tokens}")
    return pid, Target("127.0.0.1", endpoint.port, str(server.pki.ca), token)


def _call(target: Target, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 409)) -> Any:
    r = asyncio.run(_request(target, method, path, None if body is None else orjson.dumps(body)))
    if r.status not in ok:
        raise BackendError(f"{method} {path}: HTTP {r.status} {r.body[:300]!r}")
    return orjson.loads(r.body) if r.body else None


def _set_up(on: Target, hook_port: int, hook_ca: bytes) -> str:
    """The namespaces, quota, limits, the webhook, and a service account's token (returned)."""
    for key, ns in NAMESPACES.items():
        labels = {} if key == "off" else {"pod-security.kubernetes.io/enforce": "baseline"}
        if key == "hook":
            labels[HOOK_LABEL] = "yes"
        _call(on, "POST", "/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
        if key == "off":
            continue
        base = f"/api/v1/namespaces/{ns}"
        hard = {"pods": "1000000", "requests.cpu": "100k", "requests.memory": "100Ti", "limits.memory": "100Ti"}
        _call(on, "POST", f"{base}/resourcequotas", {"metadata": {"name": "bench"}, "spec": {"hard": hard}})
        item = {
            "type": "Container",
            "default": {"cpu": "100m", "memory": "64Mi"},
            "defaultRequest": {"cpu": "50m", "memory": "32Mi"},
            "max": {"cpu": "4"},
        }
        _call(on, "POST", f"{base}/limitranges", {"metadata": {"name": "bench"}, "spec": {"limits": [item]}})
        binding = {
            "metadata": {"name": "bench-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": NAMESPACES["on"]}],
        }
        _call(on, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)
    sa_base = f"/api/v1/namespaces/{NAMESPACES['on']}/serviceaccounts"
    _call(on, "POST", sa_base, {"metadata": {"name": "bench"}})
    hook = {
        "metadata": {"name": "bench-allow"},
        "webhooks": [
            {
                "name": "allow.bench.raftkube.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{hook_port}/",
                    "caBundle": base64.b64encode(hook_ca).decode(),
                },
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "namespaceSelector": {"matchLabels": {HOOK_LABEL: "yes"}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }
    _call(on, "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", hook)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 7200}}
    answer = _call(on, "POST", f"{sa_base}/bench/token", request)
    # a consistent list through every cache the plugins read: they have seen the set-up
    for path in (
        "/api/v1/resourcequotas",
        "/api/v1/limitranges",
        "/api/v1/namespaces",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    ):
        _call(on, "GET", path)
    return str(answer["status"]["token"])


def _measure(
    ctx: Context, label: str, target: Target, namespaces: list[str], in_flight: int, pids: dict[str, list[int]]
) -> dict[str, Any]:
    """One round: closed-loop creates for the phase's measuring time; raw figures, with the CPU
    seconds the processes of each role (role -> pids) spent over the measured window."""
    s = ctx.sizes
    run_id = f"g{label}{int(time.time() * 1000) % 10**7}"
    spec = {"mode": "create", "run": run_id, "nodes": 1000, "namespaces": namespaces, "target": target.to_json()}
    spec["barrier"] = True
    gens = [
        LoadProcess(
            spec | {"connections": len(g), "prefix": f"{run_id}-{k}", "system": label},
            ctx.log(f"gates-{label}-{in_flight}"),
            module=LOADGEN,
        )
        for k, g in enumerate(split(in_flight, min(s.clients, in_flight)))
    ]
    spy = None
    try:
        t = start_together(gens, s.warmup_s, s.create_s)
        wait_until(t["t_measure"])
        cpu_before = {role: server_cpu(group) for role, group in pids.items()}
        revision_before = _store_revision(target, namespaces[0])
        if in_flight > 1:  # with --profile: where the serving apiserver's time goes under load
            spy = ctx.spy_start(pids["apiserver"][0], f"gates-{label}-{in_flight}-{run_id}")
        wait_until(t["t_end"])
        cpu = {role: server_cpu(group) - cpu_before[role] for role, group in pids.items()}
        store_writes = _store_revision(target, namespaces[0]) - revision_before
        profile = ctx.spy_stop(spy) if spy is not None else None
        written = ctx.collect(gens, timeout=60)
    finally:
        ctx.kill(gens)
    return {
        "ops": sum(w["ops"] for w in written),
        "window_s": max(w["window_s"] for w in written),
        "errors": sum(w["errors"] for w in written),
        "first_error": next((w["first_error"] for w in written if w["first_error"]), ""),
        "latencies_s": [x for w in written for x in w["latencies_s"]],
        "latencies_by_namespace_s": {
            ns: [x for w in written for x in w.get("latencies_by_namespace_s", {}).get(ns, [])] for ns in namespaces
        },
        "cpu_s": cpu,
        "store_writes": store_writes,
    } | ({"profile": profile} if profile is not None else {})


def _store_revision(target: Target, namespace: str) -> int:
    """The store's revision now (a consistent list's resourceVersion): its rise over a round,
    less the creates, is the other writes the chain made (the quota's charges)."""
    listed = _call(target, "GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")
    return int(listed["metadata"]["resourceVersion"])


def _row(in_flight: int, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """A chain's row from its rounds: creates over their summed windows, latencies pooled."""
    ops = sum(r["ops"] for r in rounds)
    window = sum(r["window_s"] for r in rounds)
    cpu_ms_per_create = {role: 1e3 * sum(r["cpu_s"][role] for r in rounds) / max(1, ops) for role in rounds[0]["cpu_s"]}
    return {
        "in_flight": in_flight,
        "rounds": len(rounds),
        "creates": ops,
        "creates_per_s": ops / max(1e-9, window),
        "creates_per_s_by_round": [r["ops"] / max(1e-9, r["window_s"]) for r in rounds],
        "errors": sum(r["errors"] for r in rounds),
        "first_error": next((r["first_error"] for r in rounds if r["first_error"]), ""),
        "cpu_ms_per_create": cpu_ms_per_create,
        # every write the store took per create (1: the pod alone; more: the quota's charges)
        "store_writes_per_create": sum(r["store_writes"] for r in rounds) / max(1, ops),
        "profiles": [r["profile"] for r in rounds if "profile" in r],
    } | latency_ms([x for r in rounds for x in r["latencies_s"]])


def _paired_row(rounds: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    """One chain's share of paired rounds: its creates and their latency."""
    latencies = [x for r in rounds for x in r["latencies_by_namespace_s"][namespace]]
    return {"creates": len(latencies)} | latency_ms(latencies)


def run(ctx: Context, backend: Backend, namespaces: list[str]) -> dict[str, Any]:
    label = f"{backend.name}: gates"
    ctx.progress.start(f"{label}: starting two apiservers and a webhook")
    pids: list[int] = []
    try:
        pki_dir = ctx.root / "gates-webhook-pki"
        ca = pki.create_ca(pki_dir, "bench webhook CA")
        files = pki.issue_cert(ca, pki_dir, "webhook", common_name="127.0.0.1", hosts=("127.0.0.1",), server=True)
        port = free_ports(1)[0]
        hook = procs.spawn(
            [sys.executable, "-m", "bench.apiserver.webhook_server", str(port), str(files.cert), str(files.key)],
            log=ctx.log("gates-webhook"),
            cwd=str(Path(__file__).resolve().parents[3]),
        )
        pids.append(hook.pid)
        _wait_port(port)
        off_pid, off = _start_apiserver(
            ctx,
            backend,
            "off",
            ("--authorization-mode", "AlwaysAllow", "--disable-admission-plugins", ",".join(PLUGINS)),
        )
        pids.append(off_pid)
        on_pid, on = _start_apiserver(ctx, backend, "on", ())
        pids.append(on_pid)
        token = _set_up(on, port, ca.cert.read_bytes())
        user = Target(on.host, on.port, on.ca, token)
        rows: dict[str, Any] = {}
        # the other apiservers decode every create from their watches too: their CPU, and the
        # store's, are part of what a chain costs the machine
        store = backend.store_pids()
        on_roles = {"apiserver": [on_pid], "other apiservers": [backend.pid, off_pid], "store": store}
        hook_roles = on_roles | {"webhook": [hook.pid]}
        plan = [
            (
                "off",
                off,
                NAMESPACES["off"],
                {"apiserver": [off_pid], "other apiservers": [backend.pid, on_pid], "store": store},
            ),
            ("on", user, NAMESPACES["on"], on_roles),
            ("hook", user, NAMESPACES["hook"], hook_roles),
        ]
        for in_flight in (ctx.sizes.writers_in_flight, 1):
            rounds: dict[str, list[dict[str, Any]]] = {}
            for key, target, ns, measured_pids in [*plan, *reversed(plan)][: len(plan) * ctx.sizes.gate_orders]:
                ctx.progress.update(f"{label}: chain {key}, {in_flight} in flight", True)
                rounds.setdefault(key, []).append(_measure(ctx, key, target, [ns], in_flight, measured_pids))
            for key, measured in rounds.items():
                rows[f"{key}@{in_flight}"] = _row(in_flight, measured)
        paired = []
        for first, second in (("on", "hook"), ("hook", "on")):
            ctx.progress.update(f"{label}: chains on and hook in turns, 1 in flight", True)
            turns = [NAMESPACES[first], NAMESPACES[second]]
            paired.append(_measure(ctx, "pair", user, turns, 1, hook_roles))
    finally:
        for pid in pids:
            procs.kill(pid, wait=2.0)
    busy = ctx.sizes.writers_in_flight
    out: dict[str, Any] = {"rows": rows}
    out["gates_cost"] = 1 - rows[f"on@{busy}"]["creates_per_s"] / max(1e-9, rows[f"off@{busy}"]["creates_per_s"])
    out["paired"] = {key: _paired_row(paired, NAMESPACES[key]) for key in ("on", "hook")}
    out["webhook_p50_ms"] = out["paired"]["hook"]["p50_ms"] - out["paired"]["on"]["p50_ms"]
    out["webhook_p50_ms_separate_rounds"] = rows["hook@1"]["p50_ms"] - rows["on@1"]["p50_ms"]
    ctx.progress.end(
        f"off {rows[f'off@{busy}']['creates_per_s']:,.0f}/s, on {rows[f'on@{busy}']['creates_per_s']:,.0f}/s "
        f"(cost {100 * out['gates_cost']:.0f} %), webhook +{out['webhook_p50_ms']:.2f} ms p50"
    )
    return out
