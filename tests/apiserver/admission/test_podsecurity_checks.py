"""The Pod Security Standards' checks as pure functions: one passing and one failing pod per
check, with kube's exact reason and detail; which checks a level and version run, in which
order; and a namespace's policy from its labels."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.admission.podsecurity import checks as c
from apiserver.admission.podsecurity.evaluate import LevelVersion, checks_for, detail, evaluate
from apiserver.admission.podsecurity.policy import Policy, policy_of
from machinery import sysctls
from machinery.objects import Obj


def ctr(name: str = "c", **sc: Any) -> Obj:
    out: Obj = {"name": name, "image": "nginx"}
    if sc:
        out["securityContext"] = sc
    return out


def spec(*containers: Obj, **fields: Any) -> Obj:
    return {"containers": list(containers) or [ctr()], **fields}


RESTRICTED_OK = spec(
    ctr(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
    securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    volumes=[{"name": "v", "configMap": {"name": "x"}}, {"name": "w", "emptyDir": {}}],
)

# (check, meta, good spec, bad spec, reason, detail)
CASES: list[tuple[c.CheckFn, Obj, Obj, Obj, str, str]] = [
    (
        c.windows_host_process,
        {},
        spec(ctr(windowsOptions={"hostProcess": False})),
        spec(ctr("a", windowsOptions={"hostProcess": True}), securityContext={"windowsOptions": {"hostProcess": True}}),
        "hostProcess",
        'pod and container "a" must not set securityContext.windowsOptions.hostProcess=true',
    ),
    (
        c.host_namespaces,
        {},
        spec(hostNetwork=False),
        spec(hostNetwork=True, hostPID=True, hostIPC=True),
        "host namespaces",
        "hostNetwork=true, hostPID=true, hostIPC=true",
    ),
    (
        c.privileged,
        {},
        spec(ctr(privileged=False)),
        spec(ctr("a", privileged=True), ctr("b", privileged=True)),
        "privileged",
        'containers "a", "b" must not set securityContext.privileged=true',
    ),
    (
        c.capabilities_baseline,
        {},
        spec(ctr(capabilities={"add": ["CHOWN", "NET_BIND_SERVICE"]})),
        spec(ctr("a", capabilities={"add": ["SYS_ADMIN", "NET_RAW", "CHOWN"]})),
        "non-default capabilities",
        'container "a" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add',
    ),
    (
        c.host_path_volumes,
        {},
        spec(volumes=[{"name": "v", "emptyDir": {}}]),
        spec(volumes=[{"name": "h", "hostPath": {"path": "/"}}, {"name": "i", "hostPath": {}}]),
        "hostPath volumes",
        'volumes "h", "i"',
    ),
    (
        c.host_ports,
        {},
        spec({"name": "c", "ports": [{"containerPort": 80}]}),
        spec({"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9, "hostPort": 90}]}),
        "hostPort",
        'container "a" uses hostPorts 8080, 90',
    ),
    (
        c.app_armor_profile,
        {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}},
        spec(ctr(appArmorProfile={"type": "Localhost", "localhostProfile": "p"})),
        spec(
            ctr("a", appArmorProfile={"type": "Unconfined"}),
            securityContext={"appArmorProfile": {"type": "Unconfined"}},
        ),
        "forbidden AppArmor profile",
        'pod and container "a" must not set AppArmor profile type to "Unconfined"',
    ),
    (
        c._selinux(c.SELINUX_TYPES_1_31),
        {},
        spec(ctr(seLinuxOptions={"type": "container_engine_t", "level": "s0:c1"})),
        spec(ctr("a", seLinuxOptions={"type": "bar", "user": "u"}), securityContext={"seLinuxOptions": {"role": "r"}}),
        "seLinuxOptions",
        'pod and container "a" set forbidden securityContext.seLinuxOptions: type "bar"; user may not be set; '
        "role may not be set",
    ),
    (
        c.proc_mount,
        {},
        spec(ctr(procMount="Default")),
        spec(ctr("a", procMount="Unmasked")),
        "procMount",
        'container "a" must not set securityContext.procMount to "Unmasked"',
    ),
    (
        c.seccomp_baseline,
        {},
        spec(ctr(seccompProfile={"type": "Localhost", "localhostProfile": "p"})),
        spec(ctr("a", seccompProfile={"type": "Unconfined"})),
        "seccompProfile",
        'container "a" must not set securityContext.seccompProfile.type to "Unconfined"',
    ),
    (
        c.seccomp_baseline_1_0,
        {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}},
        spec(),
        spec(ctr("a")),
        "seccompProfile",
        'forbidden annotation container.seccomp.security.alpha.kubernetes.io/a="unconfined"',
    ),
    (
        c._sysctls(sysctls.SAFE_1_32),
        {},
        spec(securityContext={"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "1"}]}),
        spec(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.ip_forward"}]}),
        "forbidden sysctls",
        "kernel.msgmax, net.ipv4.ip_forward",
    ),
    (
        c.allow_privilege_escalation,
        {},
        spec(ctr(allowPrivilegeEscalation=False)),
        spec(ctr("a"), ctr("b", allowPrivilegeEscalation=True)),
        "allowPrivilegeEscalation != false",
        'containers "a", "b" must set securityContext.allowPrivilegeEscalation=false',
    ),
    (
        c.capabilities_restricted,
        {},
        spec(ctr(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})),
        spec(ctr("a"), ctr("b", capabilities={"drop": ["ALL"], "add": ["CHOWN"]})),
        "unrestricted capabilities",
        'container "a" must set securityContext.capabilities.drop=["ALL"]; '
        'container "b" must not include "CHOWN" in securityContext.capabilities.add',
    ),
    (
        c.restricted_volumes,
        {},
        RESTRICTED_OK,
        spec(volumes=[{"name": "h", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {}}, {"name": "x"}]),
        "restricted volume types",
        'volumes "h", "n", "x" use restricted volume types "hostPath", "nfs", "unknown"',
    ),
    (
        c.run_as_non_root,
        {},
        spec(ctr("a"), ctr("b", runAsNonRoot=True), securityContext={"runAsNonRoot": True}),
        spec(ctr("a"), ctr("b", runAsNonRoot=True)),
        "runAsNonRoot != true",
        'pod or container "a" must set securityContext.runAsNonRoot=true',
    ),
    (
        c.run_as_non_root,
        {},
        spec(ctr(runAsNonRoot=True)),
        spec(ctr("a", runAsNonRoot=False), securityContext={"runAsNonRoot": False}),
        "runAsNonRoot != true",
        'pod and container "a" must not set securityContext.runAsNonRoot=false',
    ),
    (
        c.run_as_user,
        {},
        spec(ctr(runAsUser=1000), securityContext={"runAsUser": 1}),
        spec(ctr("a", runAsUser=0), securityContext={"runAsUser": 0}),
        "runAsUser=0",
        'pod and container "a" must not set runAsUser=0',
    ),
    (
        c.seccomp_restricted,
        {},
        spec(securityContext={"seccompProfile": {"type": "RuntimeDefault"}}),
        spec(ctr("a"), ctr("b", seccompProfile={"type": "RuntimeDefault"})),
        "seccompProfile",
        'pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
    ),
]


@pytest.mark.parametrize(("check", "meta", "good", "bad", "reason", "why"), CASES)
def test_check_passes_the_good_pod_and_words_the_bad_one_as_kube(
    check: c.CheckFn, meta: Obj, good: Obj, bad: Obj, reason: str, why: str
) -> None:
    assert check(meta, good) is None
    bad_meta = meta
    if check is c.seccomp_baseline_1_0:
        bad_meta = {"annotations": {"container.seccomp.security.alpha.kubernetes.io/a": "unconfined"}}
    assert check(bad_meta, bad) == c.Result(reason, why)


def test_a_plain_pod_under_restricted_reads_as_kubectl_prints_it() -> None:
    failures = evaluate(LevelVersion("restricted"), {}, spec(ctr("c")))
    assert detail(failures) == (
        'allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
        '"Localhost")'
    )
    assert evaluate(LevelVersion("baseline"), {}, spec(ctr("c"))) == []
    assert evaluate(LevelVersion("privileged"), {}, spec(ctr("c", privileged=True))) == []
    assert evaluate(LevelVersion("restricted"), {}, RESTRICTED_OK) == []


def test_baseline_checks_come_first_and_restricted_overrides_its_baseline_twins() -> None:
    pod = spec(
        ctr("c", capabilities={"add": ["SYS_ADMIN"]}),
        hostNetwork=True,
        volumes=[{"name": "h", "hostPath": {"path": "/"}}],
    )
    restricted = [f.reason for f in evaluate(LevelVersion("restricted"), {}, pod)]
    assert restricted == [
        "host namespaces",
        "allowPrivilegeEscalation != false",
        "unrestricted capabilities",  # replaces non-default capabilities
        "restricted volume types",  # replaces hostPath volumes
        "runAsNonRoot != true",
        "seccompProfile",
    ]
    baseline = [f.reason for f in evaluate(LevelVersion("baseline"), {}, pod)]
    assert baseline == ["non-default capabilities", "host namespaces", "hostPath volumes"]


def test_versions_pick_the_rules_of_their_time() -> None:
    pod = spec(ctr("c", allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]}, runAsUser=0))
    pod["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert [f.reason for f in evaluate(LevelVersion("restricted", 23), {}, pod)] == ["runAsUser=0"]
    assert evaluate(LevelVersion("restricted", 22), {}, pod) == []  # runAsUser came in 1.23
    newer = spec(securityContext={"sysctls": [{"name": "net.ipv4.tcp_rmem"}]})
    assert evaluate(LevelVersion("baseline", 31), {}, newer)[0].reason == "forbidden sysctls"
    assert evaluate(LevelVersion("baseline", 32), {}, newer) == []
    assert evaluate(LevelVersion("baseline", 99), {}, newer) == []  # future versions are latest
    windows = spec(ctr("c"), os={"name": "windows"}, securityContext={"runAsNonRoot": True})
    assert evaluate(LevelVersion("restricted", 25), {}, windows) == []
    assert len(evaluate(LevelVersion("restricted", 24), {}, windows)) == 3
    assert len(checks_for("restricted", 33)) == len(checks_for("restricted", 33))  # cached


def test_namespace_labels_make_the_policy() -> None:
    p = policy_of({"pod-security.kubernetes.io/enforce": "restricted"})
    assert p.errors == []
    assert p.policy == Policy(LevelVersion("restricted"), LevelVersion("privileged"), LevelVersion("restricted"))
    p = policy_of(
        {
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.25",
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/audit-version": "latest",
        }
    )
    assert p.policy == Policy(LevelVersion("baseline", 25), LevelVersion("restricted"), LevelVersion("restricted"))
    assert str(p.policy.enforce) == "baseline:v1.25"
    bad = policy_of({"pod-security.kubernetes.io/enforce": "strict", "pod-security.kubernetes.io/warn-version": "1.2"})
    assert bad.policy.enforce == LevelVersion("restricted")  # enforce fails closed
    assert [(e.field, e.message) for e in bad.errors] == [
        (
            "metadata.labels[pod-security.kubernetes.io/enforce]",
            'Invalid value: "strict": must be one of privileged, baseline, restricted',
        ),
        (
            "metadata.labels[pod-security.kubernetes.io/warn-version]",
            'Invalid value: "1.2": must be "latest" or "v1.x"',
        ),
    ]
    assert policy_of({"pod-security.kubernetes.io/warn": "nope"}).policy.warn == LevelVersion("privileged")
    assert policy_of(None).policy.fully_privileged()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(
    ["containers", "initContainers", "securityContext", "volumes", "hostNetwork", "os", "ephemeralContainers"]
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _json, max_size=5), st.dictionaries(st.text(max_size=10), _json, max_size=3))
def test_hostile_specs_never_crash_the_checks(pod_spec: Obj, meta: Obj) -> None:
    for level in ("baseline", "restricted"):
        for minor in (0, 19, 25, 33):
            for failure in evaluate(LevelVersion(level, minor), meta, pod_spec):
                assert failure.reason
