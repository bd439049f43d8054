"""networking.k8s.io/v1 Ingress and IngressClass: kube's backend, host and path checks; columns."""

from __future__ import annotations

from typing import Any

from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

ING = find("networking.k8s.io", "ingresses")
CLASS = find("networking.k8s.io", "ingressclasses")
BACKEND = {"service": {"name": "web", "port": {"number": 80}}}


def ingress(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default"}, "spec": spec}


def rule(host: str = "", path: str = "/", path_type: str = "Prefix", backend: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path, "pathType": path_type, "backend": backend or BACKEND}
    return {**({"host": host} if host else {}), "http": {"paths": [entry]}}


def test_create_get_list() -> None:
    got = create(ING, ingress(ingressClassName="nginx", rules=[rule("web.example.com")]))
    assert got["spec"]["rules"][0]["host"] == "web.example.com"
    assert create(CLASS, {"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}}, None)


def test_bad_ingresses() -> None:
    assert rejected(ING, ingress()) == ["spec: Invalid value: []: either `defaultBackend` or `rules` must be specified"]
    assert causes(
        ING,
        ingress(
            defaultBackend={"service": {"name": "Web", "port": {"name": "http", "number": 80}}},
            rules=[
                rule("*.example.com"),
                rule("1.2.3.4", path="api"),
                rule(path="/a//b", path_type="Exact"),
                rule(backend={"service": {"name": "web", "port": {}}}),
                rule(path_type="Glob"),
            ],
            tls=[{"hosts": ["ok.example.com", "Bad_Host"], "secretName": "web-tls"}],
        ),
    ) == [
        'spec.defaultBackend.service.name: Invalid value: "Web": a DNS-1035 label must consist of lower case '
        "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character "
        "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        'spec.defaultBackend: Invalid value: "": cannot set both port name & port number',
        'spec.rules[1].host: Invalid value: "1.2.3.4": must be a DNS name, not an IP address',
        'spec.rules[1].http.paths[0].path: Invalid value: "api": must be an absolute path',
        "spec.rules[2].http.paths[0].path: Invalid value: \"/a//b\": must not contain '//'",
        "spec.rules[3].http.paths[0].backend: Required value: port name or number is required",
        'spec.rules[4].http.paths[0].pathType: Unsupported value: "Glob": supported values: "Exact", '
        '"ImplementationSpecific", "Prefix"',
        'spec.tls[0].hosts[1]: Invalid value: "Bad_Host": a lowercase RFC 1123 subdomain must consist of lower '
        "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ]


def test_ingress_class_rules() -> None:
    assert causes(CLASS, {"metadata": {"name": "c"}, "spec": {"controller": "nginx"}}) == [
        'spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")'
    ]
    old: dict[str, Any] = {
        "metadata": {"name": "c"},
        "spec": {"controller": "k8s.io/a", "parameters": {"kind": "K", "name": "p"}},
    }
    CLASS.default(old)
    assert old["spec"]["parameters"]["scope"] == "Cluster"
    new = {"metadata": {"name": "c"}, "spec": {"controller": "k8s.io/b"}}
    assert causes(CLASS, new, old) == ['spec.controller: Invalid value: "k8s.io/b": field is immutable']


def test_tables() -> None:
    assert headers(ING) == [("Name", 0), ("Class", 0), ("Hosts", 0), ("Address", 0), ("Ports", 0), ("Age", 0)]
    obj = ingress(rules=[rule("a.example.com"), rule(), rule("b.example.com"), rule("c.example.com"), rule("d.x")])
    obj["spec"]["tls"] = [{"hosts": ["a.example.com"]}]
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "lb.example.com"}]}}
    assert cells(ING, obj)[:5] == [
        "web",
        "<none>",
        "a.example.com,b.example.com,c.example.com + 2 more...",
        "10.0.0.1,lb.example.com",
        "80, 443",
    ]
    assert cells(ING, ingress(ingressClassName="nginx", defaultBackend=BACKEND))[1:5] == ["nginx", "*", "", "80"]
    assert headers(CLASS) == [("Name", 0), ("Controller", 0), ("Parameters", 0), ("Age", 0)]
    params = {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}
    klass = {"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx", "parameters": params}}
    assert cells(CLASS, klass)[:3] == ["nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb"]
