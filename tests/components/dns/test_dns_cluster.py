"""`raftkube dns` as a process against a real apiserver: it answers Services, headless Services'
endpoints, SRV, PTR and pod names over UDP and TCP, sees a deletion within a bound, keeps the
kube-dns Service and its slice, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
from dnslib import QTYPE, RCODE, DNSRecord

from components.client import kubeconfig
from components.client.rest import RestClient
from components.dns import registration
from machinery.process.launch import free_ports
from tests.apiserver.support import ApiserverUnderTest
from tests.support.paths import ROOT
from tests.support.wait import until


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code < 300, resp.text
    return resp.json()


def ask(port: int, name: str, qtype: str = "A", tcp: bool = False) -> Any:
    raw = DNSRecord.question(name, qtype).send("127.0.0.1", port, tcp=tcp, timeout=3)
    return DNSRecord.parse(raw)


def rdata(reply: Any) -> list[str]:
    return [str(r.rdata) for r in reply.rr]


def test_dns_process(cluster: ApiserverUnderTest, processes: list[subprocess.Popen[bytes]]) -> None:
    ns = f"dns-{uuid.uuid4().hex[:6]}"
    ip = f"10.96.{random.randint(100, 250)}.{random.randint(2, 250)}"
    with cluster.http() as http:
        ok(http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        ports = [{"name": "http", "port": 80, "protocol": "TCP"}]
        web = {"metadata": {"name": "web"}, "spec": {"clusterIP": ip, "ports": ports, "selector": {"app": "x"}}}
        ok(http.post(f"/api/v1/namespaces/{ns}/services", json={"apiVersion": "v1", "kind": "Service", **web}))
        hl = {"metadata": {"name": "hl"}, "spec": {"clusterIP": "None", "ports": ports}}
        ok(http.post(f"/api/v1/namespaces/{ns}/services", json={"apiVersion": "v1", "kind": "Service", **hl}))
        endpoint_slice = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "hl-1", "labels": {"kubernetes.io/service-name": "hl"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.244.7.5"], "hostname": "web-0", "conditions": {"ready": True}},
                {"addresses": ["10.244.7.6"], "conditions": {"ready": True}},
                {"addresses": ["10.244.7.7"], "conditions": {"ready": False, "terminating": True}},
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }
        ok(http.post(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", json=endpoint_slice))

        dns_port, health_port, silent = free_ports(3)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "components.dns",
                "--kubeconfig",
                str(cluster.kubeconfig),
                "--listen",
                f"127.0.0.1:{dns_port}",
                "--advertise",
                f"127.0.0.1:{dns_port}",
                "--upstream",
                f"127.0.0.1:{silent}",  # nothing there: other names get SERVFAIL
                "--health-port",
                str(health_port),
            ],
            cwd=ROOT,
            env={**os.environ},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        processes.append(proc)

        def healthy() -> bool:
            assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{health_port}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        until("the DNS server is healthy", healthy, wait=30)
        fqdn = f"web.{ns}.svc.cluster.local"
        for tcp in (False, True):
            assert rdata(ask(dns_port, fqdn, tcp=tcp)) == [ip]
            assert sorted(rdata(ask(dns_port, f"hl.{ns}.svc.cluster.local", tcp=tcp))) == ["10.244.7.5", "10.244.7.6"]
            assert rdata(ask(dns_port, f"web-0.hl.{ns}.svc.cluster.local", tcp=tcp)) == ["10.244.7.5"]
            srv = ask(dns_port, f"_http._tcp.web.{ns}.svc.cluster.local", "SRV", tcp=tcp)
            assert rdata(srv) == [f"0 100 80 {fqdn}."]
            srv = ask(dns_port, f"_http._tcp.hl.{ns}.svc.cluster.local", "SRV", tcp=tcp)
            assert sorted(rdata(srv)) == sorted(
                [f"0 50 8080 web-0.hl.{ns}.svc.cluster.local.", f"0 50 8080 10-244-7-6.hl.{ns}.svc.cluster.local."]
            )
            reverse = ".".join(reversed(ip.split("."))) + ".in-addr.arpa"
            assert rdata(ask(dns_port, reverse, "PTR", tcp=tcp)) == [f"{fqdn}."]
            assert rdata(ask(dns_port, "5.7.244.10.in-addr.arpa", "PTR", tcp=tcp)) == [
                f"web-0.hl.{ns}.svc.cluster.local."
            ]
            assert rdata(ask(dns_port, f"10-244-7-9.{ns}.pod.cluster.local", tcp=tcp)) == ["10.244.7.9"]
            assert rdata(ask(dns_port, "kubernetes.default.svc.cluster.local", tcp=tcp)) == ["10.96.0.1"]
            missing = ask(dns_port, f"nope.{ns}.svc.cluster.local", tcp=tcp)
            assert missing.header.rcode == RCODE.NXDOMAIN and QTYPE[missing.auth[0].rtype] == "SOA"
            assert ask(dns_port, "example.invalid", tcp=tcp).header.rcode == RCODE.SERVFAIL

        ok(http.delete(f"/api/v1/namespaces/{ns}/services/web"))
        started = time.monotonic()
        until("the deleted Service is NXDOMAIN", lambda: ask(dns_port, fqdn).header.rcode == RCODE.NXDOMAIN, wait=10)
        print(f"deletion answered after {time.monotonic() - started:.2f} s")

        def registered() -> Any:
            svc = http.get("/api/v1/namespaces/kube-system/services/kube-dns")
            sl = http.get("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-raftkube")
            return svc.status_code == 200 and sl.status_code == 200 and (svc.json(), sl.json())

        svc, sl = until("kube-dns is registered", registered, wait=15)
        assert svc["spec"]["clusterIP"] == "10.96.0.10"
        assert svc["metadata"]["labels"]["k8s-app"] == "kube-dns"
        assert {(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]} == {
            ("dns", 53, "UDP"),
            ("dns-tcp", 53, "TCP"),
            ("metrics", 9153, "TCP"),
        }
        assert sl["endpoints"][0]["addresses"] == ["127.0.0.1"]
        assert {(p["name"], p["port"]) for p in sl["ports"]} >= {("dns", dns_port), ("dns-tcp", dns_port)}
        # its own Service answers too, and the process counts what it answered
        assert rdata(ask(dns_port, "kube-dns.kube-system.svc.cluster.local")) == ["10.96.0.10"]
        text = httpx.get(f"http://127.0.0.1:{health_port}/metrics", timeout=2).text
        assert 'raftkube_dns_responses_total{rcode="NXDOMAIN"}' in text

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_registration_puts_back_what_it_owns(cluster: ApiserverUnderTest) -> None:
    target = registration.KubeDNS("10.96.0.11", "127.0.0.2", 5353)

    async def main() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            assert await registration.reconcile(client, target)
            path = registration.SERVICES.path("kube-system", "kube-dns")
            svc = await client.get(path)
            svc["spec"]["ports"] = svc["spec"]["ports"][:1]
            svc["metadata"]["labels"]["extra"] = "kept"
            await client.replace(path, svc)
            assert await registration.keep_object(client, registration.SERVICES, target.service()) == "fixed"
            svc = await client.get(path)
            assert len(svc["spec"]["ports"]) == 3 and svc["metadata"]["labels"]["extra"] == "kept"
            assert await registration.keep_object(client, registration.SERVICES, target.service()) == ""
            await client.delete(registration.SLICES.path("kube-system", registration.SLICE_NAME))
            assert await registration.keep_object(client, registration.SLICES, target.endpoint_slice()) == "created"

    asyncio.run(main())
