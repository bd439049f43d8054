"""PodSpec defaults and checks, shared by pods and by every kind with a pod template
(deployments, replicasets, jobs): the same rules under `spec` or `spec.template.spec`."""

from __future__ import annotations

import re
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._shared import ensure
from machinery import ephemeral_containers
from machinery.objects import Obj, mapping

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# a sysctl name: dot- or slash-separated segments (kube's IsValidSysctlName); at most 253 characters
_SYSCTL_SEGMENT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
SYSCTL_NAME = re.compile(f"({_SYSCTL_SEGMENT}[\\./])*{_SYSCTL_SEGMENT}")
SYSCTL_MAX_LENGTH = 253


def image_tag(image: str) -> str:
    """The tag of an image reference: `latest` when it names none (and no digest), "" with a digest."""
    if "@" in image:
        return ""
    last = image.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


_DEFAULT_MODE = 0o644  # secret, configMap, downwardAPI and projected volumes: 420
_TOKEN_SECONDS = 3600  # a projected service account token's default expiry
_VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
    "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)  # fmt: skip


def _dicts(value: Any) -> list[Obj]:
    return [d for d in value if isinstance(d, dict)] if isinstance(value, list) else []


def _default_http_get(handler: Any) -> None:
    """SetDefaults_HTTPGetAction: path `/`, scheme HTTP (probes and lifecycle hooks)."""
    action = handler.get("httpGet") if isinstance(handler, dict) else None
    if isinstance(action, dict):
        action.setdefault("path", "/")
        action.setdefault("scheme", "HTTP")


def _default_probe(probe: Any) -> None:
    """SetDefaults_Probe."""
    if not isinstance(probe, dict):
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        if not probe.get(key):
            probe[key] = value
    _default_http_get(probe)


def _default_field_ref(holder: Any) -> None:
    """SetDefaults_ObjectFieldSelector: a fieldRef names apiVersion v1."""
    ref = holder.get("fieldRef") if isinstance(holder, dict) else None
    if isinstance(ref, dict) and not ref.get("apiVersion"):
        ref["apiVersion"] = "v1"


def _default_container(c: Obj) -> None:
    """SetDefaults_Container and what the generated defaulters reach inside a container."""
    if not c.get("imagePullPolicy") and isinstance(c.get("image"), str):
        c["imagePullPolicy"] = "Always" if image_tag(c["image"]) == "latest" else "IfNotPresent"
    if not c.get("terminationMessagePath"):
        c["terminationMessagePath"] = "/dev/termination-log"
    if not c.get("terminationMessagePolicy"):
        c["terminationMessagePolicy"] = "File"
    c.setdefault("resources", {})
    for port in _dicts(c.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for env in _dicts(c.get("env")):
        _default_field_ref(env.get("valueFrom"))
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(c.get(probe))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        _default_http_get(lifecycle.get("postStart"))
        _default_http_get(lifecycle.get("preStop"))


def _default_volume(vol: Obj) -> None:
    """SetDefaults_Volume (no source: an emptyDir) and the defaults of each source."""
    if all(vol.get(s) is None for s in _VOLUME_SOURCES):
        vol["emptyDir"] = {}
    for source in ("secret", "configMap", "downwardAPI", "projected"):
        body = vol.get(source)
        if isinstance(body, dict) and body.get("defaultMode") is None:
            body["defaultMode"] = _DEFAULT_MODE
    for item in _dicts(mapping(vol, "downwardAPI").get("items")):
        _default_field_ref(item)
    host_path = vol.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""
    for projection in _dicts(mapping(vol, "projected").get("sources")):
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict) and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = _TOKEN_SECONDS
        for item in _dicts(mapping(projection, "downwardAPI").get("items")):
            _default_field_ref(item)


def default_pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec and what the generated defaulters reach below it (containers, probes,
    volumes), for pods and pod templates alike."""
    for key, value in (
        ("restartPolicy", "Always"),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
    ):
        if not spec.get(key):
            spec[key] = value
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for c in _dicts(spec.get(group)):
            _default_container(c)
    for vol in _dicts(spec.get("volumes")):
        _default_volume(vol)


def default_pod_only(spec: Obj) -> None:
    """SetDefaults_Pod: what a Pod gets and a pod template does not (kube keeps templates as
    written): enableServiceLinks, requests from limits, host ports under hostNetwork."""
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    for group in ("initContainers", "containers"):
        for c in _dicts(spec.get(group)):
            resources = c.get("resources")
            limits = resources.get("limits") if isinstance(resources, dict) else None
            if isinstance(limits, dict) and isinstance(resources, dict):
                requests = resources.get("requests")
                if requests is None:
                    requests = resources["requests"] = {}
                if isinstance(requests, dict):
                    for name, quantity in limits.items():
                        requests.setdefault(name, quantity)
            if spec.get("hostNetwork") is True:
                for port in _dicts(c.get("ports")):
                    if not port.get("hostPort") and isinstance(port.get("containerPort"), int):
                        port["hostPort"] = port["containerPort"]


def default_template(obj: Obj) -> None:
    """Defaults for `spec.template.spec` of a workload."""
    spec = ensure(obj, "spec")
    template = ensure(spec, "template") if spec is not None else None
    pod_spec = ensure(template, "spec") if template is not None else None
    if pod_spec is not None:
        default_pod_spec(pod_spec)


def _validate_ports(ports: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    names: list[tuple[str, Any]] = []
    for i, port in enumerate(v.as_list(ports, field, causes)):
        here = v.index(field, i)
        port = v.as_dict(port, here, causes)
        causes += v.validate_port(port.get("containerPort"), v.child(here, "containerPort"))
        causes += v.validate_port(port.get("hostPort"), v.child(here, "hostPort"), optional=True)
        causes += v.validate_enum(port.get("protocol"), v.child(here, "protocol"), PROTOCOLS, optional=False)
        name = port.get("name")
        if name:
            names.append((v.child(here, "name"), name))
            if not isinstance(name, str):
                causes.append(v.invalid(v.child(here, "name"), name, "must be a string"))
            else:
                causes += [v.invalid(v.child(here, "name"), name, m) for m in v.is_port_name(name)]
    causes += v.validate_unique(names)
    return causes


def _validate_container(c: Obj, here: str) -> list[Cause]:
    causes: list[Cause] = []
    if c.get("name") in (None, ""):
        causes.append(v.required(v.child(here, "name")))
    elif name := v.as_str(c.get("name"), v.child(here, "name"), causes):
        causes += [v.invalid(v.child(here, "name"), name, m) for m in v.is_dns1123_label(name)]
    image = v.as_str(c.get("image"), v.child(here, "image"), causes)
    if not image:
        causes.append(v.required(v.child(here, "image")))
    elif image != image.strip():
        causes.append(v.invalid(v.child(here, "image"), image, "must not have leading or trailing whitespace"))
    causes += v.validate_enum(c.get("imagePullPolicy"), v.child(here, "imagePullPolicy"), PULL_POLICIES)
    causes += v.validate_enum(
        c.get("terminationMessagePolicy"), v.child(here, "terminationMessagePolicy"), ("File", "FallbackToLogsOnError")
    )
    causes += _validate_ports(c.get("ports"), v.child(here, "ports"))
    for field in ("command", "args"):
        for i, arg in enumerate(v.as_list(c.get(field), v.child(here, field), causes)):
            if not isinstance(arg, str):
                causes.append(v.invalid(v.index(v.child(here, field), i), arg, "must be a string"))
    for i, env in enumerate(v.as_list(c.get("env"), v.child(here, "env"), causes)):
        env_here = v.index(v.child(here, "env"), i)
        env = v.as_dict(env, env_here, causes)
        if not env.get("name"):
            causes.append(v.required(v.child(env_here, "name")))
    return causes


EPHEMERAL_FORBIDDEN_DETAIL = "cannot be set for an Ephemeral Container"


def _is_set(value: Any) -> bool:
    """Whether a field differs from Go's zero value: an empty list or object, or one holding
    only empty values (`resources: {}`, which defaulting adds), is not set."""
    if isinstance(value, dict):
        return any(_is_set(inner) for inner in value.values())
    return value not in (None, "", [], False, 0)


def _validate_ephemeral_containers(spec: Obj, field: str) -> list[Cause]:
    """kube's validateEphemeralContainers: each a container, named uniquely across all the pod's
    containers, its target (when it names one) a container or init container of the pod, none
    of the forbidden fields, no subPath mounts."""
    causes: list[Cause] = []
    others: set[str] = set()
    for group in ("initContainers", "containers"):
        entries = spec.get(group)
        for c in entries if isinstance(entries, list) else ():
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                others.add(c["name"])
    names = set(others)
    group_field = v.child(field, "ephemeralContainers")
    for i, c in enumerate(v.as_list(spec.get("ephemeralContainers"), group_field, causes)):
        here = v.index(group_field, i)
        c = v.as_dict(c, here, causes)
        causes += _validate_container(c, here)
        name = c.get("name")
        if isinstance(name, str) and name:
            if name in names:
                causes.append(v.duplicate(v.child(here, "name"), name))
            names.add(name)
        target = c.get("targetContainerName")
        if target not in (None, "") and target not in others:
            causes.append(v.not_found(v.child(here, "targetContainerName"), target))
        causes += [
            v.forbidden(v.child(here, key), EPHEMERAL_FORBIDDEN_DETAIL)
            for key in ephemeral_containers.FORBIDDEN_FIELDS
            if _is_set(c.get(key))
        ]
        for j, mount in enumerate(v.as_list(c.get("volumeMounts"), v.child(here, "volumeMounts"), causes)):
            mount_here = v.index(v.child(here, "volumeMounts"), j)
            for key in ("subPath", "subPathExpr"):
                if isinstance(mount, dict) and _is_set(mount.get(key)):
                    causes.append(v.forbidden(v.child(mount_here, key), EPHEMERAL_FORBIDDEN_DETAIL))
    return causes


def _validate_sysctls(security_context: Any, field: str) -> list[Cause]:
    """`securityContext.sysctls`: each name well formed and named once (values are the kernel's to judge)."""
    causes: list[Cause] = []
    if not isinstance(security_context, dict):
        return causes
    seen: set[str] = set()
    sysctls_field = v.child(field, "sysctls")
    for i, sysctl in enumerate(v.as_list(security_context.get("sysctls"), sysctls_field, causes)):
        here = v.child(v.index(sysctls_field, i), "name")
        raw = v.as_dict(sysctl, v.index(sysctls_field, i), causes).get("name")
        if raw in (None, ""):
            causes.append(v.required(here))
            continue
        name = v.as_str(raw, here, causes)
        if not name:
            continue  # not a string: as_str said so
        if len(name) > SYSCTL_MAX_LENGTH or not SYSCTL_NAME.fullmatch(name):
            detail = f"must have at most {SYSCTL_MAX_LENGTH} characters and match regex {SYSCTL_NAME.pattern}"
            causes.append(v.invalid(here, name, detail))
        elif name in seen:
            causes.append(v.duplicate(here, name))
        seen.add(name)
    return causes


def validate_pod_spec(spec_value: Any, field: str) -> list[Cause]:
    """The checks that reject malformed pods clearly; not every rule of ValidatePodSpec."""
    causes: list[Cause] = []
    spec = v.as_dict(spec_value, field, causes)
    if spec_value is not None and not isinstance(spec_value, dict):
        return causes
    containers = v.as_list(spec.get("containers"), v.child(field, "containers"), causes)
    if not containers and isinstance(spec.get("containers", []), list):
        causes.append(v.required(v.child(field, "containers")))
    names: list[tuple[str, Any]] = []
    for group, entries in (("initContainers", spec.get("initContainers")), ("containers", containers)):
        group_field = v.child(field, group)
        for i, c in enumerate(v.as_list(entries, group_field, causes)):
            here = v.index(group_field, i)
            c = v.as_dict(c, here, causes)
            causes += _validate_container(c, here)
            if isinstance(c.get("name"), str) and c["name"]:
                names.append((v.child(here, "name"), c["name"]))
    causes += v.validate_unique(names)
    causes += _validate_ephemeral_containers(spec, field)
    causes += _validate_sysctls(spec.get("securityContext"), v.child(field, "securityContext"))
    causes += v.validate_enum(spec.get("restartPolicy"), v.child(field, "restartPolicy"), RESTART_POLICIES)
    causes += v.validate_enum(spec.get("dnsPolicy"), v.child(field, "dnsPolicy"), DNS_POLICIES)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not v.is_int(deadline) or not 1 <= deadline <= 2147483647):
        causes.append(
            v.invalid(v.child(field, "activeDeadlineSeconds"), deadline, "must be between 1 and 2147483647, inclusive")
        )
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and not v.is_int(grace):
        causes.append(v.invalid(v.child(field, "terminationGracePeriodSeconds"), grace, "must be an integer"))
    node_name = spec.get("nodeName")
    if node_name:
        node_field = v.child(field, "nodeName")
        if not isinstance(node_name, str):
            causes.append(v.invalid(node_field, node_name, "must be a string"))
        else:
            causes += [v.invalid(node_field, node_name, m) for m in v.is_dns1123_subdomain(node_name)]
    node_selector = spec.get("nodeSelector")
    if node_selector is not None:
        causes += v.validate_labels(node_selector, v.child(field, "nodeSelector"))
    for i, tol in enumerate(v.as_list(spec.get("tolerations"), v.child(field, "tolerations"), causes)):
        here = v.index(v.child(field, "tolerations"), i)
        tol = v.as_dict(tol, here, causes)
        causes += v.validate_enum(tol.get("operator"), v.child(here, "operator"), TOLERATION_OPERATORS)
        causes += v.validate_enum(tol.get("effect"), v.child(here, "effect"), TAINT_EFFECTS)
        if tol.get("operator") == "Exists" and tol.get("value"):
            causes.append(
                v.invalid(
                    v.child(here, "operator"), tol.get("value"), "value must be empty when `operator` is 'Exists'"
                )
            )
    return causes


def validate_template(obj: Obj, *, restart_policies: tuple[str, ...] = ("Always",)) -> list[Cause]:
    """A workload's `spec.template`: labels, the pod spec, and the restart policies the kind allows."""
    causes: list[Cause] = []
    spec = mapping(obj, "spec")
    template = v.as_dict(spec.get("template"), "spec.template", causes)
    if "template" not in spec:
        return [v.required("spec.template")]
    meta = v.as_dict(template.get("metadata"), "spec.template.metadata", causes)
    causes += v.validate_labels(meta.get("labels"), "spec.template.metadata.labels")
    causes += v.validate_annotations(meta.get("annotations"), "spec.template.metadata.annotations")
    pod_spec = template.get("spec")
    if pod_spec is None:
        return [*causes, v.required("spec.template.spec.containers")]
    causes += validate_pod_spec(pod_spec, "spec.template.spec")
    if isinstance(pod_spec, dict) and pod_spec.get("ephemeralContainers"):
        causes.append(
            v.forbidden("spec.template.spec.ephemeralContainers", "ephemeral containers not allowed in pod template")
        )
    policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, dict) else None
    if policy in RESTART_POLICIES and policy not in restart_policies:
        causes.append(v.not_supported("spec.template.spec.restartPolicy", policy, restart_policies))
    return causes
