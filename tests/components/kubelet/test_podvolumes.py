"""Volumes inside containers: a pod's volumes made on disk (emptyDir, configMap, secret,
downwardAPI), bind-mounted at each container's mountPath in a mount namespace of its own
(real mounts: the kubelet tests run as root), read-only where kube mounts them so, refreshed
when a ConfigMap changes, shared between the pod's containers, invisible to the host, and
entered by `kubectl exec`.  Bad volumeMounts are refused naming the field.  Every wait is
bounded; every container is killed by pid at the end (the `runtime` fixture)."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.kubelet import container_tmp, containerlog, image_dirs, sandbox
from components.kubelet.envvars import Sources
from components.kubelet.images import HTTPD_ROOT, HostImages
from components.kubelet.podvolumes import PodVolumes
from components.kubelet.podworker import PodWorker
from components.kubelet.process_runtime import ProcessRuntime
from components.kubelet.volumes import VolumeError
from machinery.objects import Obj
from machinery.process import peers
from tests.support.wait import until


@pytest.fixture
def mount_dir() -> Iterator[str]:
    """A mount path outside any test directory (as /etc/config would be), removed after."""
    path = f"/tmp/raftkube-mount-{uuid.uuid4().hex[:10]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


def sources(maps: dict[str, Obj] | None = None, secrets: dict[str, Obj] | None = None) -> Sources:
    return Sources(lambda ns, n: (maps or {}).get(n), lambda ns, n: (secrets or {}).get(n))


def a_pod(uid: str, containers: list[Obj], volumes: list[Obj]) -> Obj:
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid, "labels": {"app": "web"}},
        "spec": {"containers": containers, "volumes": volumes},
    }


def sh(name: str, script: str, mounts: list[Obj]) -> Obj:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], "volumeMounts": mounts}


def worker(runtime: ProcessRuntime, pod: Obj, src: Sources) -> PodWorker:
    uid = pod["metadata"]["uid"]
    return PodWorker(pod, runtime, src, "127.0.0.1", volumes=PodVolumes(runtime.root / "pods" / uid / "volumes"))


def output(runtime: ProcessRuntime, uid: str, name: str) -> bytes:
    run = runtime.seen(uid, name)
    if run is None or not run.log or not Path(run.log).exists():
        return b""
    return b"".join(e.text + b"\n" for e in containerlog.read(Path(run.log)))


def sync_until(w: PodWorker, what: str, check: Callable[[], Any]) -> Any:
    def step() -> Any:
        w.sync(time.time())
        return check()

    return until(what, step)


# -- on disk, no process ------------------------------------------------------------------------


def test_every_kind_of_volume_is_made_and_a_changed_config_map_is_written_again(tmp_path: Path) -> None:
    volumes = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "config", "configMap": {"name": "settings"}},
        {"name": "creds", "secret": {"secretName": "token", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
    ]
    pod = a_pod("v1", [], volumes)
    secret = {"data": {"token": base64.b64encode(b"s3cret").decode()}}
    pv = PodVolumes(tmp_path / "volumes")
    pv.sync(pod, sources({"settings": {"data": {"mode": "fast"}}}, {"token": secret}))
    assert (tmp_path / "volumes" / "scratch").is_dir()
    assert (tmp_path / "volumes" / "config" / "mode").read_text() == "fast"
    assert (tmp_path / "volumes" / "creds" / "token").read_bytes() == b"s3cret"
    assert (tmp_path / "volumes" / "creds" / "token").stat().st_mode & 0o777 == 0o400
    assert (tmp_path / "volumes" / "info" / "labels").read_text() == 'app="web"'
    pv.sync(pod, sources({"settings": {"data": {"mode": "slow", "extra": "1"}}}, {"token": secret}))
    assert (tmp_path / "volumes" / "config" / "mode").read_text() == "slow"
    assert (tmp_path / "volumes" / "config" / "extra").read_text() == "1"
    pv.remove()
    assert not tmp_path.exists()  # the pod's directory went, volumes and all


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        ({"name": "nope", "mountPath": "/x"}, "volumeMounts[0].name: no volume 'nope'"),
        ({"name": "scratch", "mountPath": "relative"}, "volumeMounts[0].mountPath: must be an absolute path"),
        ({"name": "scratch", "mountPath": "/a/../etc"}, "volumeMounts[0].mountPath: must not contain '..'"),
        ({"name": "scratch", "mountPath": "/"}, "volumeMounts[0].mountPath: cannot mount over /"),
        ({"name": "scratch", "mountPath": 7}, "volumeMounts[0].mountPath: must be an absolute path"),
        ({"name": "scratch", "mountPath": "/x", "subPath": "../up"}, "volumeMounts[0].subPath: must not contain"),
        ({"name": "config", "mountPath": "/x", "subPath": "missing"}, "subPath: 'missing' does not exist"),
        ("not an object", "volumeMounts[0]: must be an object"),
    ],
)
def test_bad_volume_mounts_are_refused_naming_the_field(tmp_path: Path, mount: Any, message: str) -> None:
    pod = a_pod("v2", [], [{"name": "scratch", "emptyDir": {}}, {"name": "config", "configMap": {"name": "c"}}])
    pv = PodVolumes(tmp_path / "volumes")
    pv.sync(pod, sources({"c": {"data": {"k": "v"}}}))
    with pytest.raises(VolumeError, match=message.replace("(", r"\(").replace("[", r"\[")) as e:
        pv.mounts(pod, {"name": "c", "volumeMounts": [mount]}, "spec.containers[c]")
    assert str(e.value).startswith("spec.containers[c].volumeMounts[0]")


def test_mounts_are_read_only_except_empty_dirs_unless_asked(tmp_path: Path) -> None:
    pod = a_pod("v3", [], [{"name": "scratch", "emptyDir": {}}, {"name": "config", "configMap": {"name": "c"}}])
    pv = PodVolumes(tmp_path / "volumes")
    pv.sync(pod, sources({"c": {"data": {"k": "v"}}}))
    mounts = [
        {"name": "scratch", "mountPath": "/data"},
        {"name": "scratch", "mountPath": "/ro", "readOnly": True},
        {"name": "config", "mountPath": "/etc/app/k", "subPath": "k"},
        {"name": "scratch", "mountPath": "//cache/", "subPath": "a/b"},
    ]
    got = pv.mounts(pod, {"name": "c", "volumeMounts": mounts}, "c")
    base = tmp_path / "volumes"
    assert got == (
        sandbox.Mount(str(base / "scratch"), "/data", False),
        sandbox.Mount(str(base / "scratch"), "/ro", True),
        sandbox.Mount(str(base / "config" / "k"), "/etc/app/k", True),
        sandbox.Mount(str(base / "scratch" / "a" / "b"), "/cache", False),
    )
    assert (base / "scratch" / "a" / "b").is_dir()  # kube makes an emptyDir's missing subPath


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("$(ABS)", "subPathExpr: error SubPath `/tmp` must not be an absolute path"),
        ("$(UP)", "subPathExpr: unable to provision SubPath `..`: must not contain '..'"),
        ("a/$(UP)/b", "subPathExpr: unable to provision SubPath `a/../b`: must not contain '..'"),
        ("$(EMPTY)/$(NOPE)/x", "subPathExpr: missing value for EMPTY, NOPE"),
        ("$(NUL)", "subPathExpr: unable to provision SubPath 'a\\x00b': must not contain a NUL byte"),
    ],
)
def test_a_sub_path_expression_is_expanded_then_refused_in_kubes_words(
    tmp_path: Path, expression: str, says: str
) -> None:
    """kube's makeMounts checks the expansion, which only the kubelet knows: conformance
    "Variable Expansion should fail substituting values in a volume subpath with absolute path"
    and "... with backticks" (whose value is `..`)."""
    pod = a_pod("v5", [], [{"name": "scratch", "emptyDir": {}}])
    pv = PodVolumes(tmp_path / "volumes")
    pv.sync(pod, sources())
    env = {"ABS": "/tmp", "UP": "..", "EMPTY": "", "NUL": "a\0b"}
    mount = {"name": "scratch", "mountPath": "/x", "subPathExpr": expression}
    with pytest.raises(VolumeError) as e:
        pv.mounts(pod, {"name": "c", "volumeMounts": [mount]}, "spec.containers[c]", env)
    assert str(e.value) == f"spec.containers[c].volumeMounts[0].{says}"
    assert os.listdir(tmp_path / "volumes" / "scratch") == []  # nothing made for a refused path


def test_a_sub_path_expression_is_made_inside_the_volume_with_its_mode(tmp_path: Path) -> None:
    pod = a_pod("v6", [], [{"name": "scratch", "emptyDir": {}}])
    pv = PodVolumes(tmp_path / "volumes")
    pv.sync(pod, sources())
    mounts = [
        {"name": "scratch", "mountPath": "/logs", "subPathExpr": "$(ANNOTATION)/$(POD_NAME)"},
        {"name": "scratch", "mountPath": "/all"},
    ]
    env = {"POD_NAME": "p-v6", "ANNOTATION": "mypath"}
    got = pv.mounts(pod, {"name": "c", "volumeMounts": mounts}, "c", env)
    scratch = tmp_path / "volumes" / "scratch"
    assert got == (sandbox.Mount(str(scratch / "mypath" / "p-v6"), "/logs"), sandbox.Mount(str(scratch), "/all"))
    for made in (scratch / "mypath", scratch / "mypath" / "p-v6"):
        assert made.stat().st_mode & 0o7777 == 0o777  # the emptyDir's: any user of the pod writes there
    both = {"name": "scratch", "mountPath": "/x", "subPath": "a", "subPathExpr": "b"}
    with pytest.raises(VolumeError, match=r"subPathExpr: subPathExpr and subPath are mutually exclusive"):
        pv.mounts(pod, {"name": "c", "volumeMounts": [both]}, "c", env)
    (scratch / "evil").symlink_to("/etc")
    through = {"name": "scratch", "mountPath": "/x", "subPathExpr": "$(LINK)/made-here"}
    with pytest.raises(VolumeError, match=r"subPathExpr: 'evil/made-here' leads out of volume 'scratch'"):
        pv.mounts(pod, {"name": "c", "volumeMounts": [through]}, "c", {"LINK": "evil"})
    assert not os.path.exists("/etc/made-here")


# -- real containers ----------------------------------------------------------------------------


def test_a_container_reads_its_config_map_at_its_mount_path_and_sees_an_update(
    runtime: ProcessRuntime, mount_dir: str
) -> None:
    app = sh(
        "app",
        f"while true; do cat {mount_dir}/greeting; echo; sleep 0.1; done",
        [{"name": "config", "mountPath": mount_dir}],
    )
    pod = a_pod("m1", [app], [{"name": "config", "configMap": {"name": "settings"}}])
    w = worker(runtime, pod, sources({"settings": {"data": {"greeting": "hello"}}}))
    sync_until(w, "the file in the container's log", lambda: b"hello" in output(runtime, "m1", "app"))
    assert not os.path.lexists(mount_dir)  # the mount point was made inside, not on the host's disk
    w.sources = sources({"settings": {"data": {"greeting": "bonjour"}}})
    sync_until(w, "the update inside the container", lambda: b"bonjour" in output(runtime, "m1", "app"))
    assert runtime.seen("m1", "app").attempt == 0  # type: ignore[union-attr]  # seen live, no restart


def test_an_empty_dir_is_shared_by_the_pods_containers_and_a_config_map_is_read_only(
    runtime: ProcessRuntime, mount_dir: str
) -> None:
    data, conf = f"{mount_dir}/data", f"{mount_dir}/conf"
    writer = sh(
        "writer",
        f"echo from-writer > {data}/note; touch {conf}/x || echo refused; sleep 30",
        [
            {"name": "shared", "mountPath": data},
            {"name": "config", "mountPath": conf},
        ],
    )
    reader = sh(
        "reader",
        f"until [ -s {data}/note ]; do sleep 0.05; done; cat {data}/note; sleep 30",
        [{"name": "shared", "mountPath": data}],
    )
    pod = a_pod(
        "m2", [writer, reader], [{"name": "shared", "emptyDir": {}}, {"name": "config", "configMap": {"name": "c"}}]
    )
    w = worker(runtime, pod, sources({"c": {"data": {"k": "v"}}}))
    sync_until(w, "the reader to see the writer's file", lambda: b"from-writer" in output(runtime, "m2", "reader"))
    until("the read-only mount to refuse a write", lambda: b"refused" in output(runtime, "m2", "writer"))
    assert (runtime.root / "pods" / "m2" / "volumes" / "shared" / "note").read_text() == "from-writer\n"


def test_containers_read_the_managed_etc_hosts_and_host_path_files_and_the_host_is_untouched(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    """kube's kubelet-managed /etc/hosts (conformance 'KubeletManagedEtcHosts' and 'hostAliases'):
    a container sees the pod's file, one that mounts its own /etc/hosts sees that; hostPath
    volumes bind the node's files, read-only when asked, read-write otherwise.  Mount points
    missing on the host (under /etc, under /tmp) are made inside the container only."""
    node_hosts = Path("/etc/hosts").read_bytes()
    (tmp_path / "node-file").write_text("from-the-node\n")
    original, shared = f"/etc/hosts-raftkube-{uuid.uuid4().hex[:8]}", f"/tmp/raftkube-hp-{uuid.uuid4().hex[:8]}"
    reader = sh(
        "reader",
        f"cat /etc/hosts {original}; echo nope > {original} || echo refused; echo hi > {shared}/note; sleep 30",
        [
            {"name": "node-file", "mountPath": original, "readOnly": True},
            {"name": "node-dir", "mountPath": shared},
        ],
    )
    own = sh("own", "cat /etc/hosts; sleep 30", [{"name": "node-file", "mountPath": "/etc/hosts"}])
    pod = a_pod(
        "h1",
        [reader, own],
        [
            {"name": "node-file", "hostPath": {"path": str(tmp_path / "node-file"), "type": "FileOrCreate"}},
            {"name": "node-dir", "hostPath": {"path": str(tmp_path / "made"), "type": "DirectoryOrCreate"}},
        ],
    )
    pod["spec"]["hostAliases"] = [{"ip": "123.45.67.89", "hostnames": ["foo.local", "bar.local"]}]
    w = worker(runtime, pod, sources())
    w.pod_ip = "10.88.0.9"  # the IP the kubelet reports is the one the file names
    try:
        _read_etc_hosts_and_host_paths(runtime, w, tmp_path, original, shared, node_hosts)
    finally:  # a broken sandbox must not leave its mount points on the host for the next run
        for path in (original, shared):
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            elif os.path.lexists(path):
                os.unlink(path)


def _read_etc_hosts_and_host_paths(
    runtime: ProcessRuntime, w: PodWorker, tmp_path: Path, original: str, shared: str, node_hosts: bytes
) -> None:
    logged = sync_until(w, "the reader's output", lambda: b"refused" in (o := output(runtime, "h1", "reader")) and o)
    assert logged.startswith(b"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    assert b"\n10.88.0.9\tp-h1\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo.local\tbar.local\n" in logged
    assert b"from-the-node\n" in logged
    until("the write through the read-write hostPath", (tmp_path / "made" / "note").exists)
    until("the container with its own /etc/hosts", lambda: output(runtime, "h1", "own") == b"from-the-node\n")
    assert (tmp_path / "node-file").read_text() == "from-the-node\n"  # the read-only mount refused the write
    assert (runtime.root / "pods" / "h1" / "etc-hosts").read_bytes().startswith(b"# Kubernetes-managed hosts file.")
    assert Path("/etc/hosts").read_bytes() == node_hosts
    assert not os.path.lexists(original) and not os.path.lexists(shared)


def test_exec_enters_the_containers_mounts(runtime: ProcessRuntime, mount_dir: str) -> None:
    app = sh("app", "sleep 30", [{"name": "config", "mountPath": mount_dir}])
    pod = a_pod("m3", [app], [{"name": "config", "configMap": {"name": "c"}}])
    w = worker(runtime, pod, sources({"c": {"data": {"key": "inside"}}}))
    pid = sync_until(w, "the container to run", lambda: runtime.main_pid("m3", "app"))
    seen = subprocess.run(
        ["cat", f"{mount_dir}/key"], preexec_fn=sandbox.join(pid), capture_output=True, timeout=10, check=True
    )
    assert seen.stdout == b"inside"
    context = runtime.exec_context("m3", "app")
    assert context is not None and context.pid == pid


def test_a_mount_over_the_kubelets_own_directory_still_records_the_exit(tmp_path: Path) -> None:
    """An emptyDir at /tmp is common; it must not hide the shim's run directory from the shim."""
    runtime = ProcessRuntime(tmp_path / "rt")
    box = sandbox.Sandbox(mounts=(sandbox.Mount(str(tmp_path / "elsewhere"), str(tmp_path), False),))
    (tmp_path / "elsewhere").mkdir()
    runtime.start("ns", "p", "m4", "c", ["sh", "-c", f"echo hi > {tmp_path}/f; exit 4"], {"PATH": "/bin"}, sandbox=box)
    run = until("the exit to be recorded", lambda: (s := runtime.seen("m4", "c")) is not None and not s.running and s)
    assert run.exit_code == 4
    assert (tmp_path / "elsewhere" / "f").read_text() == "hi\n"


def test_a_mount_that_fails_is_a_start_error_in_its_own_words(runtime: ProcessRuntime, tmp_path: Path) -> None:
    box = sandbox.Sandbox(mounts=(sandbox.Mount(str(tmp_path / "absent"), str(tmp_path / "target"), False),))
    (tmp_path / "target").mkdir()
    runtime.start("ns", "p", "m5", "c", ["true"], {"PATH": "/bin"}, sandbox=box)
    run = until("the start error", lambda: (s := runtime.seen("m5", "c")) is not None and not s.running and s)
    assert (run.reason, run.exit_code) == ("StartError", 128)
    assert "mount" in run.message and "No such file or directory" in run.message


def test_a_sub_path_expression_waits_for_its_variable_then_the_container_writes_there(
    runtime: ProcessRuntime, mount_dir: str
) -> None:
    """Conformance "Variable Expansion should verify that a failing subpath expansion can be
    modified during the lifecycle of a container" and "should succeed in writing subpaths":
    while the annotation is missing the container waits in CreateContainerConfigError (the pod
    Pending); once it is there the container starts, and what it writes under its subpath mount
    is in the volume under the expanded path."""
    sub, whole = f"{mount_dir}/sub", f"{mount_dir}/whole"
    app = sh(
        "app",
        f"touch {sub}/test.log; ls {whole}/mypath/foo; sleep 30",
        [
            {"name": "scratch", "mountPath": sub, "subPathExpr": "$(ANNOTATION)/$(POD_NAME)"},
            {"name": "scratch", "mountPath": whole},
        ],
    )
    app["env"] = [
        {"name": "POD_NAME", "value": "foo"},
        {"name": "ANNOTATION", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['mysubpath']"}}},
    ]
    pod = a_pod("m7", [app], [{"name": "scratch", "emptyDir": {}}])
    w = worker(runtime, pod, sources())
    for _ in range(2):  # each sync tries again, and fails again
        status = w.sync(time.time())
        assert status["phase"] == "Pending" and runtime.running_pods() == []
        assert status["containerStatuses"][0]["state"] == {
            "waiting": {
                "reason": "CreateContainerConfigError",
                "message": "spec.containers[app].volumeMounts[0].subPathExpr: missing value for ANNOTATION",
            }
        }
    w.pod["metadata"]["annotations"] = {"mysubpath": "mypath"}  # the pod's update, as the kubelet hands it over
    sync_until(w, "the file seen through the whole volume", lambda: b"test.log" in output(runtime, "m7", "app"))
    assert (runtime.root / "pods" / "m7" / "volumes" / "scratch" / "mypath" / "foo" / "test.log").is_file()


def test_a_missing_config_map_holds_the_pod_in_container_creating(runtime: ProcessRuntime) -> None:
    app = sh("app", "sleep 30", [{"name": "config", "mountPath": "/x"}])
    w = worker(runtime, a_pod("m6", [app], [{"name": "config", "configMap": {"name": "absent"}}]), sources())
    status = w.sync(time.time())
    assert status["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "ContainerCreating", "message": 'MountVolume.SetUp failed: configmap "absent" not found'}
    }
    assert runtime.running_pods() == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_mount = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["scratch", "config", "nope"]) | _json,
        "mountPath": st.sampled_from(["/data", "/a/../b", "//x//y/", "rel", "/", "/x\0y"]) | _json,
        "subPath": st.sampled_from(["a/b", "../up", "k", ".", ""]) | _json,
        "subPathExpr": st.sampled_from(["$(A)", "$(A)/$(B)", "$(UP)/x", "/$(A)", "./$(A)/.", "$(NOPE)"]) | _json,
        "readOnly": _json,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mounts=st.lists(_mount | _json, max_size=4))
def test_any_volume_mounts_give_safe_mounts_or_a_volume_error(tmp_path: Path, mounts: list[Any]) -> None:
    """Whatever a pod spec carries, the kubelet refuses it with VolumeError or mounts only
    absolute, normalised paths with no `..`, from inside the pod's volume directory."""
    pod = a_pod("fz", [], [{"name": "scratch", "emptyDir": {}}, {"name": "config", "configMap": {"name": "c"}}])
    pv = PodVolumes(tmp_path / "fuzz" / "volumes")
    pv.sync(pod, sources({"c": {"data": {"k": "v"}}}))
    try:
        got = pv.mounts(pod, {"name": "c", "volumeMounts": mounts}, "c", {"A": "a", "B": "b", "UP": ".."})
    except VolumeError:
        return
    base = str(tmp_path / "fuzz" / "volumes") + "/"
    for m in got:
        assert m.target.startswith("/") and m.target != "/" and ".." not in m.target.split("/")
        assert "//" not in m.target and m.source.startswith(base) and ".." not in m.source.split("/")


def test_a_sub_path_through_a_symlink_out_of_its_volume_is_refused(tmp_path: Path) -> None:
    """A container may leave a symlink in an emptyDir; another mount of it by subPath must not
    bind the host's directory it points at (kube's CVE-2017-1002101)."""
    pod = a_pod("v4", [], [{"name": "scratch", "emptyDir": {}}])
    pv = PodVolumes(tmp_path / "volumes")
    pv.sync(pod, sources())
    (tmp_path / "volumes" / "scratch" / "evil").symlink_to("/etc")
    for sub in ("evil", "evil/made-here"):
        mount = {"name": "scratch", "mountPath": "/x", "subPath": sub}
        with pytest.raises(VolumeError, match=rf"subPath: '{sub}' leads out of volume 'scratch'"):
            pv.mounts(pod, {"name": "c", "volumeMounts": [mount]}, "c")
    assert not os.path.exists("/etc/made-here")  # nothing was made through the link either


def test_a_host_network_pod_sees_the_nodes_hosts_file_with_its_aliases(runtime: ProcessRuntime) -> None:
    app = sh("app", "cat /etc/hosts; sleep 30", [])
    pod = a_pod("h2", [app], [])
    pod["spec"].update(hostNetwork=True, hostAliases=[{"ip": "123.45.67.89", "hostnames": ["foo", "bar"]}])
    w = worker(runtime, pod, sources())
    want = b"# Kubernetes-managed hosts file (host network).\n" + Path("/etc/hosts").read_bytes()
    logged = sync_until(w, "the container's /etc/hosts", lambda: b"foo" in (o := output(runtime, "h2", "app")) and o)
    assert logged == want + b"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"


def test_a_mount_point_inside_a_volume_is_made_in_the_volume(runtime: ProcessRuntime, mount_dir: str) -> None:
    """The first mount's point is missing under /tmp (made in a shadow of /tmp); the second's is
    missing inside the first volume, where a container runtime makes it: the pod sees it there."""
    app = sh(
        "app",
        f"cat {mount_dir}/sub/conf/k; echo; ls {mount_dir}/sub; sleep 30",
        [{"name": "shared", "mountPath": mount_dir}, {"name": "config", "mountPath": f"{mount_dir}/sub/conf"}],
    )
    pod = a_pod("m7", [app], [{"name": "shared", "emptyDir": {}}, {"name": "config", "configMap": {"name": "c"}}])
    shared = runtime.root / "pods" / "m7" / "volumes" / "shared"
    (shared / "sub").mkdir(parents=True)  # what an earlier container left in the volume
    w = worker(runtime, pod, sources({"c": {"data": {"k": "value"}}}))
    sync_until(w, "the container's output", lambda: output(runtime, "m7", "app") == b"value\nconf\n")
    assert (shared / "sub" / "conf").is_dir()
    assert not os.path.lexists(mount_dir)


@pytest.fixture
def leftovers() -> Iterator[tuple[str, str]]:
    """A directory and an empty file right under /, as earlier containers' mount points are left
    there on the host (kube's conformance uses /test-volume both for directories and files)."""
    directory, file = f"/raftkube-left-dir-{uuid.uuid4().hex[:8]}", f"/raftkube-left-file-{uuid.uuid4().hex[:8]}"
    os.mkdir(directory)
    Path(file).touch()
    yield directory, file
    os.rmdir(directory)
    os.unlink(file)


def test_a_sub_path_file_binds_over_a_leftover_directory_under_root(
    runtime: ProcessRuntime, leftovers: tuple[str, str]
) -> None:
    """Conformance "Subpath Atomic writer volumes should support subpaths with configmap pod":
    the subPath names a key of a configMap, a file reached through the atomic writer's `..data`
    link (inside the volume, so followed), bound at a path under / that the host has as a
    directory; an emptyDir goes where the host has a file.  The container gets a root of its
    own showing both, `kubectl exec` sees the same, and the host keeps its leftovers as they were."""
    directory, file = leftovers
    app = sh(
        "app",
        f"cat {directory}; echo; echo hi > {file}/note && cat {file}/note; ls /proc/self/fd >/dev/null && sleep 30",
        [
            {"name": "config", "mountPath": directory, "subPath": "configmap-key"},
            {"name": "scratch", "mountPath": file},
        ],
    )
    pod = a_pod("r1", [app], [{"name": "config", "configMap": {"name": "c"}}, {"name": "scratch", "emptyDir": {}}])
    w = worker(runtime, pod, sources({"c": {"data": {"configmap-key": "configmap-value"}}}))
    sync_until(w, "the container's output", lambda: output(runtime, "r1", "app") == b"configmap-value\nhi\n")
    pid = until("the container to run", lambda: runtime.main_pid("r1", "app"))
    seen = subprocess.run(["cat", directory], preexec_fn=sandbox.join(pid), capture_output=True, timeout=10, check=True)
    assert seen.stdout == b"configmap-value"
    assert os.path.isdir(directory) and not os.listdir(directory)
    assert os.path.isfile(file) and os.path.getsize(file) == 0
    assert (runtime.root / "pods" / "r1" / "volumes" / "scratch" / "note").read_text() == "hi\n"


def test_mount_points_right_under_root_are_made_in_a_root_of_the_containers_own(runtime: ProcessRuntime) -> None:
    """Conformance binds volumes at /test-volume, /etc/..., /test-volume/sub: a mount point
    right under / that the host lacks (a directory and a file here, one nested in the other's
    sibling) is made in the container's own root, never on the host's disk, where it would be
    left for a later container to trip on; the rest of / is seen as it is, and `kubectl exec`
    sees the same."""
    name = f"raftkube-top-{uuid.uuid4().hex[:8]}"
    directory, nested, marker = f"/{name}-d", f"/{name}-n/deeper/file", f"/var/tmp/{name}-marker"
    app = sh(
        "app",
        f"cat {directory}/k; echo; cat {nested}; echo; test -d /proc/self && echo > {marker} && sleep 30",
        [
            {"name": "config", "mountPath": directory},
            {"name": "config", "mountPath": nested, "subPath": "k"},
        ],
    )
    pod = a_pod("r2", [app], [{"name": "config", "configMap": {"name": "c"}}])
    try:
        w = worker(runtime, pod, sources({"c": {"data": {"k": "v"}}}))
        sync_until(w, "the container's output", lambda: output(runtime, "r2", "app") == b"v\nv\n")
        until("the marker on the host's /var/tmp", lambda: os.path.exists(marker))
        pid = until("the container to run", lambda: runtime.main_pid("r2", "app"))
        exec_cat = ["cat", nested]
        seen = subprocess.run(exec_cat, preexec_fn=sandbox.join(pid), capture_output=True, timeout=10, check=True)
        assert seen.stdout == b"v"
        assert not os.path.lexists(directory) and not os.path.lexists(f"/{name}-n")
    finally:  # only a broken sandbox leaves these (the assertion above says so)
        for leftover in (nested, marker):
            if os.path.isfile(leftover):
                os.unlink(leftover)
        for leftover in (directory, f"/{name}-n/deeper", f"/{name}-n"):
            if os.path.isdir(leftover):
                os.rmdir(leftover)


def test_a_read_only_root_refuses_writes_but_its_volumes_take_them(runtime: ProcessRuntime, mount_dir: str) -> None:
    """Conformance "should not write to root filesystem": `readOnlyRootFilesystem` makes every
    write outside the container's volumes fail with EROFS, in the container only."""
    root_file, tmp_file = f"/raftkube-ro-{uuid.uuid4().hex[:8]}", f"/tmp/raftkube-ro-{uuid.uuid4().hex[:8]}"
    script = (
        f"echo x > {root_file}; "  # /bin/sh is busybox's, as in the image: it names itself so
        f"{{ echo x > {tmp_file}; }} 2>/dev/null || echo tmp-refused; "
        f"echo x > {mount_dir}/f && echo volume-written; sleep 30"
    )
    app = sh("app", script, [{"name": "scratch", "mountPath": mount_dir}])
    app["command"][0] = "/bin/sh"
    app["securityContext"] = {"readOnlyRootFilesystem": True}
    pod = a_pod("ro1", [app], [{"name": "scratch", "emptyDir": {}}])
    w = worker(runtime, pod, sources())
    try:
        refused = f"/bin/sh: can't create {root_file}: Read-only file system\n".encode()
        want = refused + b"tmp-refused\nvolume-written\n"
        # stderr's line and stdout's are read apart: their order in the log is not the shell's
        lines = sorted(want.splitlines())
        sync_until(w, "the container's writes", lambda: sorted(output(runtime, "ro1", "app").splitlines()) == lines)
        assert (runtime.root / "pods" / "ro1" / "volumes" / "scratch" / "f").read_text() == "x\n"
        # the host's root stays writable: the remount was the container's namespace's alone
        Path(tmp_file).write_text("host")
    finally:
        for leftover in (root_file, tmp_file):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def test_each_container_run_has_its_own_tmp(runtime: ProcessRuntime) -> None:
    """As on an image's root filesystem: what a container writes to /tmp neither the node nor
    its pod's other container sees (conformance's exec-probe specs each write /tmp/health side
    by side); a volume mounted under /tmp shows inside it; `kubectl exec` sees the same /tmp."""
    mark = f"raftkube-own-tmp-{uuid.uuid4().hex[:8]}"
    writer = sh("writer", f"echo mine > /tmp/{mark}; echo written; sleep 30", [])
    reader = sh(
        "reader",
        f"sleep 1; test -e /tmp/{mark} && echo shared || echo own; cat /tmp/cfg/k; echo; sleep 30",
        [{"name": "config", "mountPath": "/tmp/cfg"}],
    )
    pod = a_pod("t1", [writer, reader], [{"name": "config", "configMap": {"name": "c"}}])
    w = worker(runtime, pod, sources({"c": {"data": {"k": "v"}}}))
    sync_until(w, "the writer's output", lambda: output(runtime, "t1", "writer") == b"written\n")
    sync_until(w, "the reader's output", lambda: output(runtime, "t1", "reader") == b"own\nv\n")
    assert not os.path.exists(f"/tmp/{mark}")
    pid = until("the writer to run", lambda: runtime.main_pid("t1", "writer"))
    seen = subprocess.run(
        ["cat", f"/tmp/{mark}"], preexec_fn=sandbox.join(pid), capture_output=True, timeout=10, check=True
    )
    assert seen.stdout == b"mine\n"
    for name, private in (("writer", True), ("reader", False)):  # the reader's file is its volume's
        assert (runtime.root / "pods" / "t1" / "tmp" / name / "0" / mark).exists() is private


def test_a_private_tmp_is_made_empty_per_run_and_older_runs_are_removed(tmp_path: Path) -> None:
    first = container_tmp.mount_for(tmp_path, "app", 0)
    assert first.target == "/tmp" and not first.read_only
    assert Path(first.source).stat().st_mode & 0o7777 == 0o1777  # any user may write, as /tmp
    (Path(first.source) / "left").write_text("x")
    container_tmp.mount_for(tmp_path, "app", 1)
    third = container_tmp.mount_for(tmp_path, "app", 2)
    assert sorted(p.name for p in (tmp_path / "tmp" / "app").iterdir()) == ["1", "2"]  # the previous run stays
    assert list(Path(third.source).iterdir()) == []


def test_an_images_own_files_are_bound_read_only_at_their_paths(
    runtime: ProcessRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agnhost's netexec serves HTTPS with the image's /localhost.crt and .key (conformance's
    lifecycle-hook handler pod): the table binds the files the peers build put beside the peer,
    read-only, for any user."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    peers.peer_path("agnhost").parent.mkdir(parents=True)
    peers.peer_path("agnhost").write_text("#!/bin/sh\n")
    peers.peer_path("agnhost").chmod(0o755)
    peers.image_files_dir("agnhost").mkdir()
    for name in ("localhost.crt", "localhost.key"):
        (peers.image_files_dir("agnhost") / name).write_text(f"image {name}\n")
    script = "cat /localhost.crt /localhost.key; { echo x > /localhost.crt; } 2>/dev/null || echo read-only; sleep 30"
    app = {
        "name": "app",
        "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
        "command": ["sh", "-c", script],
        "securityContext": {"runAsUser": 1000},
    }
    pod = a_pod("f1", [app], [])
    uid = pod["metadata"]["uid"]
    w = PodWorker(
        pod,
        runtime,
        sources(),
        "127.0.0.1",
        volumes=PodVolumes(runtime.root / "pods" / uid / "volumes"),
        images=HostImages(),
    )
    sync_until(
        w,
        "the image files read",
        lambda: output(runtime, "f1", "app") == b"image localhost.crt\nimage localhost.key\nread-only\n",
    )
    assert not os.path.exists("/localhost.crt")  # in the container's own root only
    assert not os.path.exists("/localhost.crt")


def test_an_images_changed_files_are_each_runs_own_writable_copy(runtime: ProcessRuntime) -> None:
    """The httpd image's web root is the container's to change (conformance's StatefulSet specs
    move index.html away to make a pod unready, and back): each container has its own copy,
    seeded with the image's text, bound at the image's path; the node's filesystem and the
    pod's other container see none of it, and `kubectl exec` sees the container's."""
    index = f"{HTTPD_ROOT}/index.html"
    mover = {
        "name": "mover",
        "image": "registry.k8s.io/e2e-test-images/httpd:2.4.38-4",
        "command": ["sh", "-c", f"cat {index}; mv {index} /tmp/ && echo moved; sleep 30"],
    }
    keeper = {
        "name": "keeper",
        "image": "registry.k8s.io/e2e-test-images/httpd:2.4.38-4",
        "command": ["sh", "-c", f"sleep 1; cat {index}; sleep 30"],
    }
    pod = a_pod("h1", [mover, keeper], [])
    w = PodWorker(
        pod,
        runtime,
        sources(),
        "127.0.0.1",
        volumes=PodVolumes(runtime.root / "pods" / "h1" / "volumes"),
        images=HostImages(),
    )
    page = b"<html><body><h1>It works!</h1></body></html>\n"
    sync_until(w, "the mover's output", lambda: output(runtime, "h1", "mover") == page + b"moved\n")
    sync_until(w, "the keeper's output", lambda: output(runtime, "h1", "keeper") == page)
    assert not os.path.exists(HTTPD_ROOT)
    pid = until("the mover to run", lambda: runtime.main_pid("h1", "mover"))
    seen = subprocess.run(
        ["sh", "-c", f"ls {HTTPD_ROOT}; cat /tmp/index.html"],
        preexec_fn=sandbox.join(pid),
        capture_output=True,
        timeout=10,
        check=True,
    )
    assert seen.stdout == page


def test_an_images_writable_directories_are_made_per_run_read_only_when_asked(tmp_path: Path) -> None:
    files = (
        ("/srv/www/index.html", "hello\n"),
        ("/srv/www/other.html", "x"),
        ("/etc/app.conf", "a=1\n"),
        ("/data/", ""),
    )
    first = image_dirs.mounts_for(tmp_path, "app", 0, files)
    assert [(m.target, m.read_only) for m in first] == [("/srv/www", False), ("/etc", False), ("/data", False)]
    assert list(Path(first[2].source).iterdir()) == []
    assert sorted(p.name for p in Path(first[0].source).iterdir()) == ["index.html", "other.html"]
    assert (Path(first[1].source) / "app.conf").read_text() == "a=1\n"
    (Path(first[0].source) / "index.html").unlink()
    image_dirs.mounts_for(tmp_path, "app", 1, files)
    third = image_dirs.mounts_for(tmp_path, "app", 2, files, read_only=True)
    assert sorted(p.name for p in (tmp_path / "image" / "app").iterdir()) == ["1", "2"]
    assert (Path(third[0].source) / "index.html").read_text() == "hello\n"
    assert all(m.read_only for m in third)
    assert image_dirs.mounts_for(tmp_path, "none", 0, ()) == ()


def test_a_claim_mounts_its_bound_volumes_directory_and_waits_while_unbound(tmp_path: Path) -> None:
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "db"}},
        {"name": "ro", "persistentVolumeClaim": {"claimName": "db", "readOnly": True}},
    ]
    pod = a_pod("v-claim", [], volumes)
    pv = PodVolumes(tmp_path / "volumes")
    with pytest.raises(VolumeError, match="claim 'db' is not bound"):
        pv.sync(pod, Sources(lambda ns, n: None, lambda ns, n: None, claims={"db": None}))
    local = tmp_path / "local-volumes" / "pvc-1"
    pv.sync(pod, Sources(lambda ns, n: None, lambda ns, n: None, claims={"db": str(local)}))
    assert local.is_dir()  # DirectoryOrCreate: the provisioner's directory made on first use
    mounts = [{"name": "data", "mountPath": "/var/lib/db"}, {"name": "ro", "mountPath": "/ro"}]
    got = pv.mounts(pod, {"name": "c", "volumeMounts": mounts}, "c")
    assert got == (sandbox.Mount(str(local), "/var/lib/db", False), sandbox.Mount(str(local), "/ro", True))
