"""PodSpec defaults and checks, shared by pods and by every kind with a pod template
(deployments, replicasets, jobs): the same rules under `spec` or `spec.template.spec`."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._shared import Obj, ensure, mapping

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def image_tag(image: str) -> str:
    """The tag of an image reference: `latest` when it names none (and no digest), "" with a digest."""
    if "@" in image:
        return ""
    last = image.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


def _default_container(c: Obj) -> None:
    if not c.get("imagePullPolicy") and isinstance(c.get("image"), str):
        c["imagePullPolicy"] = "Always" if image_tag(c["image"]) == "latest" else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    ports = c.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def default_pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container, as kubectl sees them in `-o yaml`."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for group in ("initContainers", "containers"):
        containers = spec.get(group)
        for c in containers if isinstance(containers, list) else []:
            if isinstance(c, dict):
                _default_container(c)


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
    policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, dict) else None
    if policy in RESTART_POLICIES and policy not in restart_policies:
        causes.append(v.not_supported("spec.template.spec.restartPolicy", policy, restart_policies))
    return causes
