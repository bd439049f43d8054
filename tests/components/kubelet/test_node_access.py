"""Reaching into pods through the apiserver and a kubelet process's HTTPS API, with real kubectl:
`kubectl logs` (follow, tail, timestamps, previous), `kubectl exec` (output, stderr, exit
codes, stdin, a terminal with its size), `kubectl attach` (the output from then on), an
admission webhook that sees exec and attach as CONNECTs and may refuse one,
`kubectl port-forward` to an HTTP server in the pod,
`kubectl debug` adding an ephemeral container that exec and logs then reach;
and who may not: no client certificate, another component's, a user bound only to `view`."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apiserver.pki import ApiserverPKI, component_kubeconfig, user_kubeconfig
from components.client.connector import session_closed_to_the_socket
from components.kubelet import channels
from machinery.process import pki
from machinery.process.launch import free_ports
from tests.apiserver.kubectl_support import finish, kubectl_running
from tests.apiserver.support import ApiserverUnderTest, kubectl_binary
from tests.apiserver.webhook_support import configuration, hook, make_tls, webhook_server
from tests.support.wait import until as wait_until

NODE = "na-1"
POD = "na-pod"
WAIT_S = 30.0
# files from the working dir, and POST answers how many bytes it read
WEB_SERVER = """
import http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = str(len(body)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


TICK = "echo tick $i; sleep 0.2"


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    return wait_until(what, check, wait, step=0.2)


@pytest.fixture(scope="module")
def node(cluster: ApiserverUnderTest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A kubelet process serving HTTPS, and a pod on it: `web` serves HTTP on a free port,
    `counter` prints three lines and ends."""
    root = tmp_path_factory.mktemp("node-access")
    creds = ApiserverPKI.of(cluster.data_dir)
    serving = creds.kubelet_serving(NODE, "127.0.0.1")
    kubelet_port, web_port = free_ports(2)
    argv = [sys.executable, "-m", "components.cli", "kubelet"]
    argv += ["--kubeconfig", str(component_kubeconfig(cluster.data_dir, f"kubelet:{NODE}"))]
    argv += ["--node-name", NODE, "--root-dir", str(root / "kubelet"), "--port", str(kubelet_port)]
    argv += ["--tls-cert-file", str(serving.cert), "--tls-private-key-file", str(serving.key)]
    argv += ["--client-ca-file", str(creds.ca)]
    kubelet_log = root / "kubelet.log"
    with kubelet_log.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "web",
                    "image": "python:3",
                    "command": ["python3", "-c", WEB_SERVER, str(web_port)],  # the image's: /tmp is its own
                    "workingDir": str(root),
                    "env": [{"name": "MARK", "value": "from-the-pod-spec"}],
                    "volumeMounts": [{"name": "site", "mountPath": str(root)}],  # /tmp is the container's own
                },
                {
                    "name": "counter",
                    "image": "busybox",
                    "command": ["sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"],
                },
                {  # ticks until the test leaves a file in the root: what `kubectl attach` reads
                    "name": "ticker",
                    "image": "busybox",
                    "command": [
                        "sh",
                        "-c",
                        f"i=0; until [ -e {root}/stop-ticker ]; do i=$((i+1)); echo tick $i; sleep 0.2; done",
                    ],
                    "volumeMounts": [{"name": "site", "mountPath": str(root)}],
                },
            ],
            "volumes": [{"name": "site", "hostPath": {"path": str(root)}}],
        },
    }
    (root / "index.html").write_text("hello through port-forward\n")
    (root / "big.bin").write_bytes(bytes(range(256)) * 1200)
    try:
        cluster.ok("apply", "-f", "-", stdin=json.dumps(pod))

        def web_serving() -> bool:
            with socket.socket() as s:
                s.settimeout(1.0)
                return s.connect_ex(("127.0.0.1", web_port)) == 0

        try:
            until("the web container listening", web_serving)
        except AssertionError as e:  # say why: the kubelet's own account and the pod's status
            pod_now = cluster.kubectl("get", "pod", POD, "-o", "json").stdout[-3000:]
            kubelet_said = kubelet_log.read_text(errors="replace")[-6000:]
            raise AssertionError(f"{e}\nthe pod: {pod_now}\nthe kubelet's log:\n{kubelet_said}") from None
        yield {"kubelet_port": kubelet_port, "web_port": web_port, "root": root, "proc": proc}
    finally:
        cluster.kubectl("delete", "pod", POD, "--wait=false")
        until("the pod's deletion confirmed", lambda: cluster.kubectl("get", "pod", POD).returncode != 0)
        proc.terminate()
        proc.wait(timeout=15)
        cluster.kubectl("delete", "node", NODE)


def test_logs(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    # -f follows the container until it ends, then kubectl exits
    assert cluster.ok("logs", POD, "-c", "counter", "-f", timeout=30) == "line 1\nline 2\nline 3\n"
    assert cluster.ok("logs", POD, "-c", "counter", "--tail", "1") == "line 3\n"
    stamped = cluster.ok("logs", POD, "-c", "counter", "--timestamps").splitlines()
    assert [re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z line \d$", line) is not None for line in stamped] == [
        True
    ] * 3
    assert cluster.ok("logs", POD, "-c", "counter", "--since", "1h").count("line") == 3
    assert cluster.ok("logs", POD, "-c", "counter", "--limit-bytes", "8") == "line 1\nl"
    # without -c kubectl picks the first container and says so
    defaulted = cluster.kubectl("logs", POD)
    assert defaulted.returncode == 0 and 'Defaulted container "web"' in defaulted.stderr
    previous = cluster.kubectl("logs", POD, "-c", "counter", "--previous")
    assert previous.returncode == 1
    assert f'previous terminated container "counter" in pod "{POD}" not found' in previous.stderr


def test_logs_of_the_http_server_show_the_requests_it_served(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{node['web_port']}/index.html", timeout=5) as r:
        assert r.status == 200

    def logged() -> bool:
        return '"GET /index.html HTTP/1.1" 200' in cluster.ok("logs", POD, "-c", "web")

    until("the request in the web container's log", logged)


def test_exec(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    run = cluster.kubectl("exec", POD, "-c", "web", "--", "sh", "-c", "echo out; echo err >&2; echo $MARK; pwd; exit 3")
    assert run.returncode == 3
    assert run.stdout == f"out\nfrom-the-pod-spec\n{node['root']}\n"  # the container's env and working dir
    assert "err" in run.stderr and "command terminated with exit code 3" in run.stderr
    assert cluster.ok("exec", POD, "-c", "web", "--", "hostname") == f"{POD}\n"  # exec joins the pod's UTS namespace
    status = cluster.ok("exec", POD, "-c", "web", "--", "cat", "/proc/self/status")
    assert re.search(r"^Pid:\s+\d+$", status, re.M)
    echoed = cluster.kubectl("exec", "-i", POD, "-c", "web", "--", "cat", stdin="hello\nworld\n")
    assert (echoed.returncode, echoed.stdout) == (0, "hello\nworld\n")  # stdin's end reached cat (v5 close)
    big = "x" * 300_000 + "\n"
    assert cluster.ok("exec", "-i", POD, "-c", "web", "--", "wc", "-c", stdin=big).strip() == str(len(big))
    missing = cluster.kubectl("exec", POD, "-c", "web", "--", "no-such-command")
    assert missing.returncode == 1 and 'exec: "no-such-command": executable file not found' in missing.stderr


def test_exec_refusals(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    bogus = cluster.kubectl("exec", POD, "-c", "bogus", "--", "true")
    assert bogus.returncode == 1 and f"container bogus is not valid for pod {POD}" in bogus.stderr
    until("the counter to end", lambda: "Terminated" in cluster.ok("describe", "pod", POD))
    ended = cluster.kubectl("exec", POD, "-c", "counter", "--", "true")
    assert ended.returncode == 1 and 'container "counter" is not running' in ended.stderr
    gone = cluster.kubectl("exec", "no-such-pod", "--", "true")
    assert gone.returncode == 1 and 'pods "no-such-pod" not found' in gone.stderr


def test_a_terminal_with_its_size(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    """`kubectl exec -it`, as its WebSocket client speaks it (kubectl needs a real terminal)."""

    async def go() -> bytes:
        url = cluster.url.replace("https://", "wss://") + f"/api/v1/namespaces/default/pods/{POD}/exec"
        query = [("command", "sh"), ("container", "web"), ("stdin", "true"), ("stdout", "true"), ("tty", "true")]
        headers = {"Authorization": f"Bearer {cluster.token}"}
        async with (
            session_closed_to_the_socket() as session,
            session.ws_connect(
                url, params=query, protocols=[channels.V5], headers=headers, ssl=cluster.ssl_context()
            ) as ws,
        ):
            assert ws.protocol == channels.V5
            await ws.send_bytes(channels.frame(channels.RESIZE, b'{"Width":101,"Height":33}\n'))
            await ws.send_bytes(channels.frame(channels.STDIN, b"tty; stty size; exit 7\n"))
            out, outcome = b"", b""
            async with asyncio.timeout(20):
                async for msg in ws:
                    assert msg.type == aiohttp.WSMsgType.BINARY
                    stream, data = msg.data[0], msg.data[1:]
                    assert stream in (channels.STDOUT, channels.ERROR)  # a terminal has one output
                    if stream == channels.STDOUT:
                        out += data
                    else:
                        outcome += data
            assert json.loads(outcome)["details"]["causes"] == [{"reason": "ExitCode", "message": "7"}]
        return out

    out = asyncio.run(go())
    assert re.search(rb"/dev/pts/\d+", out) and b"33 101" in out


def test_exec_over_the_unversioned_channel_protocol(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    """`channel.k8s.io`, as golang.org/x/net/websocket offers it (conformance "Pods should support
    remote command execution over websockets"): stdout on channel 1, and no message longer than
    its channel byte on any other stream when the command succeeds."""

    async def go() -> list[bytes]:
        url = cluster.url.replace("https://", "wss://") + f"/api/v1/namespaces/default/pods/{POD}/exec"
        query = [("command", "echo"), ("command", "remote execution test"), ("container", "web"), ("stdout", "1")]
        headers = {"Authorization": f"Bearer {cluster.token}"}
        messages: list[bytes] = []
        async with (
            session_closed_to_the_socket() as session,
            session.ws_connect(
                url, params=query, protocols=["channel.k8s.io"], headers=headers, ssl=cluster.ssl_context()
            ) as ws,
        ):
            assert ws.protocol == channels.V1
            async with asyncio.timeout(20):
                async for msg in ws:
                    assert msg.type == aiohttp.WSMsgType.BINARY
                    messages.append(msg.data)
        return messages

    messages = asyncio.run(go())
    assert all(m[0] == channels.STDOUT or len(m) == 1 for m in messages), messages
    assert b"".join(m[1:] for m in messages if m[0] == channels.STDOUT) == b"remote execution test\n"


def test_logs_over_a_websocket(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    """Conformance "Pods should support retrieving logs from the container over websockets":
    binary messages of the log under `binary.k8s.io`, base64 text under `base64.binary.k8s.io`
    (followed here, until the container ends), then a close; authorized as a GET of pods/log."""
    url = cluster.url.replace("https://", "wss://") + f"/api/v1/namespaces/default/pods/{POD}/log"
    headers = {"Authorization": f"Bearer {cluster.token}"}

    async def read(protocol: str, query: list[tuple[str, str]]) -> tuple[str | None, list[aiohttp.WSMessage]]:
        async with (
            session_closed_to_the_socket() as session,
            session.ws_connect(
                url, params=query, protocols=[protocol], headers=headers, ssl=cluster.ssl_context()
            ) as ws,
        ):
            async with asyncio.timeout(20):
                messages = [m async for m in ws]
        return ws.protocol, messages

    # followed until the container ends
    protocol, messages = asyncio.run(read("base64.binary.k8s.io", [("container", "counter"), ("follow", "true")]))
    assert protocol == "base64.binary.k8s.io" and {m.type for m in messages} == {aiohttp.WSMsgType.TEXT}
    assert b"".join(base64.b64decode(m.data) for m in messages) == b"line 1\nline 2\nline 3\n"
    protocol, messages = asyncio.run(read("binary.k8s.io", [("container", "counter"), ("tailLines", "2")]))
    assert protocol == "binary.k8s.io" and {m.type for m in messages} == {aiohttp.WSMsgType.BINARY}
    assert b"".join(m.data for m in messages) == b"line 2\nline 3\n"

    async def refused(extra: dict[str, str], query: list[tuple[str, str]]) -> tuple[int, str]:
        async with session_closed_to_the_socket() as session:
            try:
                await session.ws_connect(
                    url, params=query, protocols=["binary.k8s.io"], headers=headers | extra, ssl=cluster.ssl_context()
                )
            except aiohttp.WSServerHandshakeError as e:
                return e.status, e.message
        raise AssertionError("the upgrade was accepted")

    # a user who may not read pods/log, and a container the pod does not have: no upgrade
    assert asyncio.run(refused({"Impersonate-User": "na-nobody"}, [("container", "counter")]))[0] == 403
    assert asyncio.run(refused({}, [("container", "nope")]))[0] == 400


def test_port_forward(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    [local] = free_ports(1)
    with kubectl_running(cluster, "port-forward", f"pod/{POD}", f"{local}:{node['web_port']}", minor=33) as reader:
        reader.wait_for(f"Forwarding from 127.0.0.1:{local}")
        for _ in range(3):  # each request is its own connection: its own pair of streams
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=10) as r:
                assert r.status == 200 and r.read() == b"hello through port-forward\n"
        # more than SPDY's 64 KiB window, each way
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/big.bin", timeout=10) as r:
            assert r.read() == (node["root"] / "big.bin").read_bytes()
        request = urllib.request.Request(f"http://127.0.0.1:{local}/", data=b"y" * 200_000, method="POST")
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.read() == b"200000"


def test_port_forward_to_a_closed_port_reports_kubes_error(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    local, closed = free_ports(2)
    with kubectl_running(cluster, "port-forward", f"pod/{POD}", f"{local}:{closed}", minor=33) as reader:
        reader.wait_for(f"Forwarding from 127.0.0.1:{local}")
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10)
        code, _, err = finish(reader)  # kubectl ends the session on a forwarding error, as against kube
        assert code != 0 and f"error forwarding port {closed} to pod {POD}" in err


def test_the_kubelet_api_takes_only_the_apiserver(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    creds = ApiserverPKI.of(cluster.data_dir)
    url = f"https://127.0.0.1:{node['kubelet_port']}/pods"

    def get(ctx: ssl.SSLContext) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        get(pki.client_context(creds.ca))  # no client certificate: the handshake fails
    scheduler = creds.component_cert("scheduler")
    code, body = get(pki.client_context(creds.ca, scheduler.cert, scheduler.key))
    assert code == 403 and b'user "system:kube-scheduler" may not call the kubelet API' in body
    apiserver = creds.kubelet_client()
    code, body = get(pki.client_context(creds.ca, apiserver.cert, apiserver.key))
    assert code == 200 and [p["metadata"]["name"] for p in json.loads(body)["items"]] == [POD]
    # the measured usage metrics.k8s.io is made from: the apiserver's alone too
    url = f"https://127.0.0.1:{node['kubelet_port']}/metrics/resource"
    code, body = get(pki.client_context(creds.ca, scheduler.cert, scheduler.key))
    assert code == 403 and b"may not call the kubelet API (/metrics/resource)" in body
    code, body = get(pki.client_context(creds.ca, apiserver.cert, apiserver.key))
    assert code == 200 and b"node_cpu_usage_seconds_total" in body


def test_a_viewer_may_read_logs_but_not_exec(cluster: ApiserverUnderTest, node: dict[str, Any], tmp_path: Path) -> None:
    config = user_kubeconfig(cluster.data_dir, "na-viewer", out=tmp_path / "viewer.kubeconfig")
    cluster.ok("create", "rolebinding", "na-viewer", "--clusterrole", "view", "--user", "na-viewer")
    try:
        base = [str(kubectl_binary(33)), "--kubeconfig", str(config)]

        def as_viewer(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*base, *args], capture_output=True, text=True, timeout=30, check=False)

        until("the binding in effect", lambda: as_viewer("logs", POD, "-c", "counter").returncode == 0)
        denied = as_viewer("exec", POD, "-c", "web", "--", "true")
        assert denied.returncode == 1
        assert 'User "na-viewer" cannot create resource "pods/exec"' in denied.stderr
        forward = as_viewer("port-forward", f"pod/{POD}", f"{free_ports(1)[0]}:{node['web_port']}")
        assert forward.returncode == 1 and 'cannot create resource "pods/portforward"' in forward.stderr
        proxied = as_viewer("get", "--raw", f"/api/v1/namespaces/default/pods/{POD}:{node['web_port']}/proxy/")
        assert proxied.returncode == 1 and 'cannot get resource "pods/proxy"' in proxied.stderr
    finally:
        cluster.kubectl("delete", "rolebinding", "na-viewer")


def test_kubectl_debug_adds_an_ephemeral_container_that_runs(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    """What conformance 'Ephemeral Containers' does: the container added through
    pods/ephemeralcontainers (kubectl sends a strategic merge patch) runs, moves the generation,
    and `exec` and `logs` reach it by name.  Last in this module: the pod keeps it."""
    assert cluster.ok("get", "pod", POD, "-o", "jsonpath={.metadata.generation}") == "1"
    script = "while true; do echo polo; sleep 1; done"
    cluster.ok("debug", POD, "-c", "debugger", "--image", "busybox", "--profile", "general", "--", "sh", "-c", script)

    def debugger_state() -> Any:
        pod = json.loads(cluster.ok("get", "pod", POD, "-o", "json"))
        found = [s for s in pod["status"].get("ephemeralContainerStatuses") or () if s["name"] == "debugger"]
        return found[0] if found and "running" in found[0]["state"] else None

    status = until("the debugger running", debugger_state)
    assert status["ready"] is False and status["restartCount"] == 0 and status["image"] == "busybox"
    assert cluster.ok("get", "pod", POD, "-o", "jsonpath={.metadata.generation}") == "2"
    assert cluster.ok("exec", POD, "-c", "debugger", "--", "/bin/echo", "marco") == "marco\n"
    until("polo in the debugger's log", lambda: "polo" in cluster.ok("logs", POD, "-c", "debugger"))
    taken = cluster.kubectl("debug", POD, "-c", "web", "--image", "busybox", "--profile", "general", "--", "true")
    assert taken.returncode == 1 and 'spec.ephemeralContainers[1].name: Duplicate value: "web"' in taken.stderr


def test_attach_streams_the_output_from_then_on_until_the_container_ends(
    cluster: ApiserverUnderTest, node: dict[str, Any]
) -> None:
    argv = [str(kubectl_binary(33)), "--kubeconfig", str(cluster.kubeconfig), "attach", POD, "-c", "ticker"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # bounded: the container ends below, and so does attach
        assert re.fullmatch(r"tick \d+\n", first), first
        (node["root"] / "stop-ticker").touch()
        out, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 0, err
        ticks = [int(line.split()[1]) for line in (first + out).splitlines() if line.startswith("tick ")]
        assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))  # in order, none lost
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    no_stdin = cluster.kubectl("attach", "-i", POD, "-c", "web")
    assert no_stdin.returncode != 0


def test_a_webhook_sees_exec_and_attach_as_connects_and_may_refuse_them(
    cluster: ApiserverUnderTest, node: dict[str, Any], tmp_path: Path
) -> None:
    """Conformance "should be able to deny attaching pod": the webhook gets the request's options
    (PodExecOptions, PodAttachOptions) as the object, and its words reach kubectl."""
    tls = make_tls(tmp_path)
    seen: list[dict[str, Any]] = []

    def judge(review: dict[str, Any]) -> dict[str, Any]:
        request = review["request"]
        seen.append(request)
        if request["object"].get("command") == ["forbidden"]:
            return {"allowed": False, "status": {"code": 403, "message": "exec of 'forbidden' is not allowed"}}
        return {"allowed": True}

    async def go() -> None:
        async with webhook_server(tls) as server:
            server.handlers["/connect"] = judge
            resources = ["pods/exec", "pods/attach"]
            rules = [{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}]
            webhook = hook("connects.example.com", server.url("/connect"), tls.ca_bundle, rules=rules)
            config = configuration("ValidatingWebhookConfiguration", "na-connects", webhook)
            await asyncio.to_thread(cluster.ok, "apply", "-f", "-", stdin=json.dumps(config))
            try:
                for _ in range(100):  # bounded: the configuration reaches the apiserver's cache
                    run = await asyncio.to_thread(cluster.kubectl, "exec", POD, "-c", "web", "--", "forbidden")
                    if "exec of 'forbidden' is not allowed" in run.stderr:
                        break
                    await asyncio.sleep(0.2)
                assert run.returncode != 0 and "exec of 'forbidden' is not allowed" in run.stderr, run.stderr
                allowed = await asyncio.to_thread(cluster.ok, "exec", POD, "-c", "web", "--", "echo", "allowed")
                assert allowed == "allowed\n"
            finally:
                await asyncio.to_thread(cluster.kubectl, "delete", "validatingwebhookconfiguration", "na-connects")

    asyncio.run(go())
    request = next(r for r in seen if r["object"].get("command") == ["echo", "allowed"])
    assert request["operation"] == "CONNECT" and request["subResource"] == "exec" and request["name"] == POD
    assert request["kind"] == {"group": "", "version": "v1", "kind": "PodExecOptions"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert request["object"]["container"] == "web" and request["object"]["stdout"] is True
    assert "options" not in request  # a connect has no operation options


def test_pods_proxy_relays_http_to_the_pod(cluster: ApiserverUnderTest, node: dict[str, Any]) -> None:
    """`pods/proxy` as kubectl and client-go use it (conformance's "serve a basic image on each
    replica" reads its pods so): the method, the rest of the path and the body reach the pod."""
    port = node["web_port"]
    base = f"/api/v1/namespaces/default/pods/{POD}:{port}/proxy"
    until("the pod's IP in its status", lambda: cluster.ok("get", "pod", POD, "-o", "jsonpath={.status.podIP}"))
    assert cluster.ok("get", "--raw", f"{base}/index.html") == "hello through port-forward\n"
    with_scheme = f"/api/v1/namespaces/default/pods/http:{POD}:{port}/proxy/index.html"
    assert cluster.ok("get", "--raw", with_scheme) == "hello through port-forward\n"
    posted = cluster.kubectl("create", "--raw", f"{base}/count", "-f", "-", stdin="12345")
    assert posted.returncode == 0 and posted.stdout == "5", posted.stderr
    missing = cluster.kubectl("get", "--raw", f"{base}/no-such-file")
    assert missing.returncode != 0 and "NotFound" in missing.stderr + missing.stdout
    bad = cluster.kubectl("get", "--raw", f"/api/v1/namespaces/default/pods/{POD}:http/proxy/")
    assert bad.returncode != 0 and "no port named 'http'" in bad.stderr
    big = cluster.kubectl("create", "--raw", f"{base}/count", "-f", "-", stdin="x" * (4 << 20))
    assert big.returncode != 0 and "Request entity too large" in big.stderr  # the apiserver's 3 MiB
