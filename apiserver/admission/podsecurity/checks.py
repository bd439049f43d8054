"""The Pod Security Standards' checks, each a pure function of a pod's metadata and spec (dicts,
as stored), with the reason and detail kube's PodSecurity admission words.

A check has an id, a level (baseline or restricted) and versions: from policy version 1.x on,
a given function applies (the standards tightened or relaxed over time).  A restricted check
may override baseline checks it supersedes (restricted volumes replace the hostPath check).
The set is the one Kubernetes 1.33 ships: checks added later (probe hosts in 1.34, the
user-namespace relaxations of 1.35) are not here, since 1.33 is the version we serve.
Input is untrusted: a field of the wrong type counts as unset, never as an error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from machinery import sysctls
from machinery.objects import Obj, as_dict

BASELINE = "baseline"
RESTRICTED = "restricted"


@dataclass(frozen=True, slots=True)
class Result:
    """A failed check; a passed one is None."""

    reason: str
    detail: str


CheckFn = Callable[[Obj, Obj], Result | None]  # (pod metadata, pod spec) -> failure or None


@dataclass(frozen=True, slots=True)
class Versioned:
    minimum: int  # the 1.x minor this function applies from
    fn: CheckFn
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    level: str
    versions: tuple[Versioned, ...]


# -- helpers over untrusted dicts ------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def containers(spec: Obj) -> Iterator[Obj]:
    """Init containers, containers, then ephemeral containers: kube's visiting order."""
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for c in _list(spec.get(group)):
            if isinstance(c, dict):
                yield c


def _name(c: Obj) -> str:
    return str(c.get("name", ""))


def _sc(obj: Obj) -> Obj:
    return as_dict(obj.get("securityContext"))


def _has_sc(obj: Obj, field: str) -> bool:
    return isinstance(obj.get("securityContext"), dict) and obj["securityContext"].get(field) is not None


def join_quote(items: list[str]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _who(kind: str, names: list[str]) -> str:
    return f"{_plural(kind, kind + 's', len(names))} {join_quote(names)}"


def _setters(pod_bad: bool, bad_containers: list[str]) -> list[str]:
    out = ["pod"] if pod_bad else []
    if bad_containers:
        out.append(_who("container", bad_containers))
    return out


def _windows(spec: Obj) -> bool:
    return as_dict(spec.get("os")).get("name") == "windows"


def _q(value: Any) -> str:
    """Go's %q of a string (JSON's quoting agrees for the characters labels and names hold)."""
    return json.dumps(str(value), ensure_ascii=False)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# -- baseline --------------------------------------------------------------------------------


def windows_host_process(meta: Obj, spec: Obj) -> Result | None:
    bad = [_name(c) for c in containers(spec) if as_dict(_sc(c).get("windowsOptions")).get("hostProcess") is True]
    pod_bad = as_dict(_sc(spec).get("windowsOptions")).get("hostProcess") is True
    setters = _setters(pod_bad, bad)
    if setters:
        return Result(
            "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"
        )
    return None


def host_namespaces(meta: Obj, spec: Obj) -> Result | None:
    found = [f"{f}=true" for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f) is True]
    return Result("host namespaces", ", ".join(found)) if found else None


def privileged(meta: Obj, spec: Obj) -> Result | None:
    bad = [_name(c) for c in containers(spec) if _sc(c).get("privileged") is True]
    if bad:
        return Result("privileged", f"{_who('container', bad)} must not set securityContext.privileged=true")
    return None


BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _added(c: Obj) -> list[str]:
    return [str(a) for a in _list(as_dict(_sc(c).get("capabilities")).get("add"))]


def capabilities_baseline(meta: Obj, spec: Obj) -> Result | None:
    bad: list[str] = []
    extra: set[str] = set()
    for c in containers(spec):
        beyond = [a for a in _added(c) if a not in BASELINE_CAPABILITIES]
        if beyond:
            bad.append(_name(c))
            extra.update(beyond)
    if bad:
        return Result(
            "non-default capabilities",
            f"{_who('container', bad)} must not include {join_quote(sorted(extra))} "
            "in securityContext.capabilities.add",
        )
    return None


def host_path_volumes(meta: Obj, spec: Obj) -> Result | None:
    bad = [
        str(v.get("name", ""))
        for v in _list(spec.get("volumes"))
        if isinstance(v, dict) and v.get("hostPath") is not None
    ]
    return Result("hostPath volumes", _who("volume", bad)) if bad else None


def host_ports(meta: Obj, spec: Obj) -> Result | None:
    bad: list[str] = []
    ports: set[int] = set()
    for c in containers(spec):
        found = [p.get("hostPort") for p in _list(c.get("ports")) if isinstance(p, dict)]
        used = [p for p in found if isinstance(p, int) and not isinstance(p, bool) and p != 0]
        if used:
            bad.append(_name(c))
            ports.update(used)
    if bad:
        shown = ", ".join(sorted(str(p) for p in ports))  # sorted as strings, as kube's string set
        return Result(
            "hostPort",
            f"{_who('container', bad)} {_plural('uses', 'use', len(bad))} "
            f"{_plural('hostPort', 'hostPorts', len(ports))} {shown}",
        )
    return None


APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _apparmor_bad_type(holder: Obj) -> str | None:
    profile = _sc(holder).get("appArmorProfile")
    if not isinstance(profile, dict):
        return None
    kind = _str(profile.get("type"))
    return None if kind in ("RuntimeDefault", "Localhost") else kind


def app_armor_profile(meta: Obj, spec: Obj) -> Result | None:
    setters: list[str] = []
    values: set[str] = set()
    pod_bad = _apparmor_bad_type(spec)
    if pod_bad is not None:
        setters.append("pod")
        values.add(pod_bad)
    bad: list[str] = []
    for c in containers(spec):
        found = _apparmor_bad_type(c)
        if found is not None:
            bad.append(_name(c))
            values.add(found)
    if bad:
        setters.append(_who("container", bad))
    shown = sorted(values)
    annotations = sorted(
        f"{k}={_q(v)}"
        for k, v in as_dict(meta.get("annotations")).items()
        if str(k).startswith(APPARMOR_ANNOTATION_PREFIX)
        and not (v == "" or v == "runtime/default" or str(v).startswith("localhost/"))
    )
    if annotations:
        shown += annotations
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if setters:
        return Result(
            _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(shown)),
            f"{' and '.join(setters)} must not set AppArmor profile type to {join_quote(shown)}",
        )
    return None


SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
SELINUX_TYPES_1_31 = SELINUX_TYPES_1_0 | {"container_engine_t"}


def _selinux(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> Result | None:
        bad_types: set[str] = set()
        flags = {"user": False, "role": False}

        def valid(holder: Obj) -> bool:
            opts = _sc(holder).get("seLinuxOptions")
            if not isinstance(opts, dict):
                return True
            ok = True
            kind = _str(opts.get("type"))
            if kind not in allowed:
                ok = False
                bad_types.add(kind)
            for f in ("user", "role"):
                if _str(opts.get(f)):
                    ok = False
                    flags[f] = True
            return ok

        pod_bad = not valid(spec)
        bad = [_name(c) for c in containers(spec) if not valid(c)]
        setters = _setters(pod_bad, bad)
        if not setters:
            return None
        data: list[str] = []
        if bad_types:
            data.append(f"{_plural('type', 'types', len(bad_types))} {join_quote(sorted(bad_types))}")
        data += [f"{f} may not be set" for f in ("user", "role") if flags[f]]
        return Result(
            "seLinuxOptions",
            f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
        )

    return check


def proc_mount(meta: Obj, spec: Obj) -> Result | None:
    bad: list[str] = []
    kinds: set[str] = set()
    for c in containers(spec):
        mount = _sc(c).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(_name(c))
            kinds.add(str(mount))
    if bad:
        return Result(
            "procMount",
            f"{_who('container', bad)} must not set securityContext.procMount to {join_quote(sorted(kinds))}",
        )
    return None


SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"


def seccomp_baseline_1_0(meta: Obj, spec: Obj) -> Result | None:
    """Before 1.19 the profile was an annotation."""
    annotations = as_dict(meta.get("annotations"))
    forbidden: set[str] = set()

    def judge(key: str) -> None:
        if key in annotations:
            value = str(annotations[key])
            if not (value in ("runtime/default", "docker/default") or value.startswith("localhost/")):
                forbidden.add(f"{key}={_q(value)}")

    judge(SECCOMP_POD_ANNOTATION)
    for c in containers(spec):
        judge(SECCOMP_CONTAINER_ANNOTATION_PREFIX + _name(c))
    if forbidden:
        return Result(
            "seccompProfile",
            f"forbidden {_plural('annotation', 'annotations', len(forbidden))} {', '.join(sorted(forbidden))}",
        )
    return None


def _seccomp_type(holder: Obj) -> str | None:
    """The profile type a pod or container sets, or None when it sets none."""
    profile = _sc(holder).get("seccompProfile")
    return _str(profile.get("type")) if isinstance(profile, dict) else None


def _seccomp_valid(kind: str) -> bool:
    return kind in ("RuntimeDefault", "Localhost")


def _seccomp(meta: Obj, spec: Obj, *, required: bool) -> Result | None:
    values: set[str] = set()
    pod_type = _seccomp_type(spec)
    pod_bad = pod_type is not None and not _seccomp_valid(pod_type)
    if pod_bad and pod_type is not None:
        values.add(pod_type)
    pod_set = pod_type is not None and not pod_bad
    explicit: list[str] = []
    implicit: list[str] = []
    for c in containers(spec):
        kind = _seccomp_type(c)
        if kind is not None:
            if not _seccomp_valid(kind):
                explicit.append(_name(c))
                values.add(kind)
        elif not pod_set:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return Result(
            "seccompProfile",
            f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to {join_quote(sorted(values))}",
        )
    if required and implicit:
        return Result(
            "seccompProfile",
            f"pod or {_who('container', implicit)} must set securityContext.seccompProfile.type to "
            f'"RuntimeDefault" or "Localhost"',
        )
    return None


def seccomp_baseline(meta: Obj, spec: Obj) -> Result | None:
    return _seccomp(meta, spec, required=False)


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> Result | None:
        names = [str(s.get("name", "")) for s in _list(_sc(spec).get("sysctls")) if isinstance(s, dict)]
        bad = [n for n in names if n not in allowed]
        return Result("forbidden sysctls", ", ".join(bad)) if bad else None

    return check


# -- restricted ------------------------------------------------------------------------------


def _unless_windows(fn: CheckFn) -> CheckFn:
    """From 1.25 a pod that says `os.name: windows` is exempt (its API validation forbids the field)."""

    def check(meta: Obj, spec: Obj) -> Result | None:
        return None if _windows(spec) else fn(meta, spec)

    return check


def allow_privilege_escalation(meta: Obj, spec: Obj) -> Result | None:
    bad = [_name(c) for c in containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if bad:
        return Result(
            "allowPrivilegeEscalation != false",
            f"{_who('container', bad)} must set securityContext.allowPrivilegeEscalation=false",
        )
    return None


def capabilities_restricted(meta: Obj, spec: Obj) -> Result | None:
    missing_drop: list[str] = []
    adding: list[str] = []
    forbidden: set[str] = set()
    for c in containers(spec):
        caps = _sc(c).get("capabilities")
        if not isinstance(caps, dict):
            missing_drop.append(_name(c))
            continue
        if "ALL" not in _list(caps.get("drop")):
            missing_drop.append(_name(c))
        beyond = [str(a) for a in _list(caps.get("add")) if a != "NET_BIND_SERVICE"]
        if beyond:
            adding.append(_name(c))
            forbidden.update(beyond)
    details: list[str] = []
    if missing_drop:
        details.append(f'{_who("container", missing_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(
            f"{_who('container', adding)} must not include {join_quote(sorted(forbidden))} "
            "in securityContext.capabilities.add"
        )
    return Result("unrestricted capabilities", "; ".join(details)) if details else None


ALLOWED_VOLUME_SOURCES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
RESTRICTED_VOLUME_SOURCES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def restricted_volumes(meta: Obj, spec: Obj) -> Result | None:
    bad: list[str] = []
    kinds: set[str] = set()
    for vol in _list(spec.get("volumes")):
        if not isinstance(vol, dict):
            continue
        if any(vol.get(s) is not None for s in ALLOWED_VOLUME_SOURCES):
            continue
        bad.append(str(vol.get("name", "")))
        kinds.add(next((s for s in RESTRICTED_VOLUME_SOURCES if vol.get(s) is not None), "unknown"))
    if bad:
        return Result(
            "restricted volume types",
            f"{_who('volume', bad)} {_plural('uses', 'use', len(bad))} "
            f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} {join_quote(sorted(kinds))}",
        )
    return None


def run_as_non_root(meta: Obj, spec: Obj) -> Result | None:
    pod_value = _sc(spec).get("runAsNonRoot")
    pod_bad = pod_value is not None and pod_value is not True
    pod_ok = pod_value is True
    explicit: list[str] = []
    implicit: list[str] = []
    for c in containers(spec):
        value = _sc(c).get("runAsNonRoot")
        if value is not None:
            if value is not True:
                explicit.append(_name(c))
        elif not pod_ok:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return Result(
            "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
        )
    if implicit:
        return Result(
            "runAsNonRoot != true", f"pod or {_who('container', implicit)} must set securityContext.runAsNonRoot=true"
        )
    return None


def _is_root(holder: Obj) -> bool:
    uid = _sc(holder).get("runAsUser")
    return isinstance(uid, int) and not isinstance(uid, bool) and uid == 0


def run_as_user(meta: Obj, spec: Obj) -> Result | None:
    setters = _setters(_is_root(spec), [_name(c) for c in containers(spec) if _is_root(c)])
    if setters:
        return Result("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0")
    return None


def seccomp_restricted(meta: Obj, spec: Obj) -> Result | None:
    return _seccomp(meta, spec, required=True)


# -- the table -------------------------------------------------------------------------------

CHECKS: tuple[Check, ...] = (
    Check("allowPrivilegeEscalation", RESTRICTED, (
        Versioned(8, allow_privilege_escalation),
        Versioned(25, _unless_windows(allow_privilege_escalation)),
    )),
    Check("appArmorProfile", BASELINE, (Versioned(0, app_armor_profile),)),
    Check("capabilities_baseline", BASELINE, (Versioned(0, capabilities_baseline),)),
    Check("capabilities_restricted", RESTRICTED, (
        Versioned(22, capabilities_restricted, ("capabilities_baseline",)),
        Versioned(25, _unless_windows(capabilities_restricted), ("capabilities_baseline",)),
    )),
    Check("hostNamespaces", BASELINE, (Versioned(0, host_namespaces),)),
    Check("hostPathVolumes", BASELINE, (Versioned(0, host_path_volumes),)),
    Check("hostPorts", BASELINE, (Versioned(0, host_ports),)),
    Check("privileged", BASELINE, (Versioned(0, privileged),)),
    Check("procMount", BASELINE, (Versioned(0, proc_mount),)),
    Check("restrictedVolumes", RESTRICTED, (Versioned(0, restricted_volumes, ("hostPathVolumes",)),)),
    Check("runAsNonRoot", RESTRICTED, (Versioned(0, run_as_non_root),)),
    Check("runAsUser", RESTRICTED, (Versioned(23, run_as_user),)),
    Check("seLinuxOptions", BASELINE, (
        Versioned(0, _selinux(SELINUX_TYPES_1_0)),
        Versioned(31, _selinux(SELINUX_TYPES_1_31)),
    )),
    Check("seccompProfile_baseline", BASELINE, (
        Versioned(0, seccomp_baseline_1_0),
        Versioned(19, seccomp_baseline),
    )),
    Check("seccompProfile_restricted", RESTRICTED, (
        Versioned(19, seccomp_restricted, ("seccompProfile_baseline",)),
        Versioned(25, _unless_windows(seccomp_restricted), ("seccompProfile_baseline",)),
    )),
    Check("sysctls", BASELINE, (
        Versioned(0, _sysctls(sysctls.SAFE_1_0)),
        Versioned(27, _sysctls(sysctls.SAFE_1_27)),
        Versioned(29, _sysctls(sysctls.SAFE_1_29)),
        Versioned(32, _sysctls(sysctls.SAFE_1_32)),
    )),
    Check("windowsHostProcess", BASELINE, (Versioned(0, windows_host_process),)),
)  # fmt: skip
