"""The kubelet's HTTPS server (kube's port 10250): what the apiserver reaches for `pods/log`,
`pods/exec`, `pods/attach`, `pods/portforward` and `nodes/proxy`.

    GET /healthz                                  ok
    GET /pods                                     the pods this kubelet runs (a PodList)
    GET /containerLogs/NS/POD/CONTAINER?...       a container's log (PodLogOptions; follow streams)
    GET /exec/NS/POD/CONTAINER?command=..&stdin=..&stdout=..&stderr=..&tty=..
                                                  WebSocket, v5/v4.channel.k8s.io (exec_session)
    GET /attach/NS/POD/CONTAINER?stdout=..&stderr=..
                                                  WebSocket, the same protocols (attach_session)
    GET /portForward/NS/POD                       WebSocket, SPDY/3.1+portforward.k8s.io (portforward)

Only a client with a certificate from the cluster CA gets through the handshake; of those, only
the apiserver (`kube-apiserver-kubelet-client`) and `system:masters` may call anything but
/healthz: kube's kubelet would ask the apiserver (SubjectAccessReview) about anyone else, we
refuse them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson
from aiohttp import web

from components.kubelet import attach_session, containerlog, exec_session, portforward, resource_usage
from components.kubelet.podworker import PodWorker
from components.kubelet.process_runtime import ProcessRuntime
from machinery import pod_log_options
from machinery.objects import Obj

log = logging.getLogger("raftkube.kubelet.server")
APISERVER_USER = "kube-apiserver-kubelet-client"
MASTERS = "system:masters"
FOLLOW_POLL_S = 0.2
ERROR_HEADER = "Kubelet-Error"


class Pods(Protocol):
    def find(self, namespace: str, name: str) -> PodWorker | None: ...

    def pods(self) -> list[Obj]: ...


def peer_user(peercert: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]]:
    """(CN, O...) of a verified client certificate, as `getpeercert()` gives it."""
    name, groups = "", []
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not name:
                name = str(value)
            elif key == "organizationName":
                groups.append(str(value))
    return name, tuple(groups)


def may_call(user: str, groups: tuple[str, ...]) -> bool:
    return user == APISERVER_USER or MASTERS in groups


class KubeletServer:
    def __init__(
        self, pods: Pods, runtime: ProcessRuntime, tls: ssl.SSLContext, clock: Callable[[], float] = time.time
    ) -> None:
        self.pods = pods
        self.runtime = runtime
        self.tls = tls
        self.clock = clock
        self.app = web.Application(middlewares=[self._authorize], client_max_size=64 * 1024)
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/pods", self._pods)
        self.app.router.add_get("/metrics/resource", self._resource_metrics)
        self.app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        self.app.router.add_get("/exec/{namespace}/{pod}/{container}", self._exec)
        self.app.router.add_get("/attach/{namespace}/{pod}/{container}", self._attach)
        self.app.router.add_get("/portForward/{namespace}/{pod}", self._port_forward)
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=self.tls)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or ()
        self.port = sockets[0].getsockname()[1] if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _authorize(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/healthz":
            return await handler(request)  # type: ignore[no-any-return]
        transport = request.transport
        user, groups = peer_user(transport.get_extra_info("peercert") if transport else None)
        if not may_call(user, groups):
            return web.Response(status=403, text=f'user "{user}" may not call the kubelet API ({request.path})\n')
        try:
            return await handler(request)  # type: ignore[no-any-return]
        except web.HTTPException as e:
            # a WebSocket client sees the status of a refused upgrade but not its body: the
            # apiserver reads why from this header and tells kubectl
            if e.status >= 400 and e.text:
                e.headers[ERROR_HEADER] = e.text.strip().encode("ascii", "backslashreplace").decode()[:1024]
            raise

    def _worker(self, request: web.Request) -> PodWorker:
        worker = self.pods.find(request.match_info["namespace"], request.match_info["pod"])
        if worker is None:
            ns, pod = request.match_info["namespace"], request.match_info["pod"]
            raise web.HTTPNotFound(text=f'pod "{pod}" in namespace "{ns}" not found on this node\n')
        return worker

    def _container(self, worker: PodWorker, name: str) -> None:
        if name not in worker.container_names():
            raise web.HTTPNotFound(text=f'container "{name}" not found in pod "{worker.pod["metadata"]["name"]}"\n')

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _pods(self, request: web.Request) -> web.Response:
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": self.pods.pods()}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def _resource_metrics(self, request: web.Request) -> web.Response:
        """The node's and each running container's CPU and memory (resource_usage.py): what
        the apiserver's metrics.k8s.io is computed from.  /proc is read off the event loop."""
        text = await asyncio.to_thread(self._usage_text)
        return web.Response(text=text, content_type="text/plain", headers={"X-Content-Version": "0.0.4"})

    def _usage_text(self) -> str:
        procs = resource_usage.snapshot()
        samples = []
        for pod in self.pods.pods():
            meta = pod.get("metadata") or {}
            for container in (pod.get("spec") or {}).get("containers") or ():
                pid = self.runtime.main_pid(str(meta.get("uid") or ""), str(container.get("name") or ""))
                usage = resource_usage.tree_usage(pid, procs) if pid else None
                if usage is not None:
                    sample = resource_usage.ContainerSample(
                        str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(container["name"]), usage
                    )
                    samples.append(sample)
        return resource_usage.render(resource_usage.node_usage(), samples, int(self.clock() * 1000))

    # -- logs -----------------------------------------------------------------------------------

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        try:
            options = pod_log_options.parse(request.query)
        except ValueError as e:
            raise web.HTTPBadRequest(text=f"{e}\n") from None
        worker = self._worker(request)
        name = request.match_info["container"]
        self._container(worker, name)
        run = self.runtime.seen(worker.uid, name)
        pod = worker.pod["metadata"]["name"]
        if options.previous:
            attempts = self.runtime.attempts(worker.uid, name)
            run = self.runtime.seen(worker.uid, name, attempts[-2]) if len(attempts) > 1 else None
            if run is None:
                raise web.HTTPBadRequest(text=f'previous terminated container "{name}" in pod "{pod}" not found\n')
        if run is None or not run.log:
            raise web.HTTPBadRequest(text=f'container "{name}" in pod "{pod}" is waiting to start\n')
        follower = containerlog.Follower(Path(run.log), since_ns=options.since_ns(self.clock()))
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        budget = options.limit_bytes
        try:
            entries = follower.history(options.tail_lines)
            while True:
                for entry in entries:
                    line = entry.text + b"\n"
                    if options.timestamps:
                        line = entry.time.encode() + b" " + line
                    if budget is not None:
                        line = line[:budget]
                        budget -= len(line)
                    await response.write(line)
                    if budget == 0:
                        return response
                if not options.follow or options.previous:
                    break
                state = self.runtime.seen(worker.uid, name, run.attempt)
                if state is None or not state.running:
                    entries = follower.poll()  # what it wrote last, then the stream ends with it
                    if not entries:
                        break
                    continue
                await asyncio.sleep(FOLLOW_POLL_S)
                entries = follower.poll()
        finally:
            follower.close()
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    # -- exec and port-forward ------------------------------------------------------------------

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        worker = self._worker(request)
        name = request.match_info["container"]
        self._container(worker, name)
        context = self.runtime.exec_context(worker.uid, name)
        if context is None:
            raise web.HTTPBadRequest(text=f'container "{name}" is not running\n')
        try:
            params = exec_session.parse_query(request.query)
        except ValueError as e:
            raise web.HTTPBadRequest(text=f"{e}\n") from None
        argv, executable = worker.exec_program(name, params.command)
        params = dataclasses.replace(params, command=argv)
        return await exec_session.serve(request, params, context.env, context.cwd, context.pid, executable)

    async def _attach(self, request: web.Request) -> web.StreamResponse:
        worker = self._worker(request)
        name = request.match_info["container"]
        self._container(worker, name)
        run = self.runtime.seen(worker.uid, name)
        if run is None or not run.running or not run.log:
            raise web.HTTPBadRequest(text=f'container "{name}" is not running\n')
        try:
            params = attach_session.parse_query(request.query, name)
        except ValueError as e:
            raise web.HTTPBadRequest(text=f"{e}\n") from None

        def running() -> bool:
            state = self.runtime.seen(worker.uid, name, run.attempt)
            return state is not None and state.running

        return await attach_session.serve(request, params, Path(run.log), running)

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        worker = self._worker(request)
        return await portforward.serve(request, worker.pod_ip, worker.pod["metadata"]["name"], worker.uid)
