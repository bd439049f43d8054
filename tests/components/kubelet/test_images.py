"""The image table's pure rules: repository matching, kube's four command/args cases, the
busybox applets, the errors (ErrImagePull's messages) and the checks of user entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.kubelet.config import KubeletSettings, load_kubelet_settings
from components.kubelet.images import (
    HTTPD_ROOT,
    SHIPPED,
    HostImages,
    ImageEntry,
    ImagePullError,
    match,
    parse_entries,
    repository,
    resolve,
    unparse,
)
from components.kubelet.main import image_table
from machinery.process.config import ConfigError
from machinery.process.peers import image_files_dir, peer_path

TOOL = ImageEntry(image="example.com/tool", entrypoint=("/bin/tool", "--verbose"), cmd=("serve", "--port=80"))


@pytest.mark.parametrize(
    ("reference", "repo"),
    [
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause"),
        ("registry.k8s.io/pause", "registry.k8s.io/pause"),
        ("registry.k8s.io/pause@sha256:ab12", "registry.k8s.io/pause"),
        ("registry.k8s.io/pause:3.10@sha256:ab12", "registry.k8s.io/pause"),
        ("localhost:5000/app:v1", "localhost:5000/app"),  # a registry's port is not a tag
        ("localhost:5000/app", "localhost:5000/app"),
        ("docker.io/library/busybox:1.36", "busybox"),
        ("docker.io/someone/app", "someone/app"),
        ("busybox", "busybox"),
    ],
)
def test_repository_drops_tag_and_digest(reference: str, repo: str) -> None:
    assert repository(reference) == repo


@pytest.mark.parametrize(
    ("image", "entry_image"),
    [
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause"),
        ("registry.k8s.io/pause", "registry.k8s.io/pause"),
        ("registry.k8s.io/e2e-test-images/agnhost:2.53", "registry.k8s.io/e2e-test-images/agnhost"),
        ("busybox:1.36", "busybox"),
        ("docker.io/library/busybox:1.29-4", "busybox"),
        ("registry.k8s.io/e2e-test-images/busybox:1.36.1-1", "registry.k8s.io/e2e-test-images/busybox"),
        ("registry.k8s.io/e2e-test-images/httpd:2.4.38-4", "registry.k8s.io/e2e-test-images/httpd"),
        ("registry.k8s.io/e2e-test-images/nginx:1.14-4", "registry.k8s.io/e2e-test-images/nginx"),
    ],
)
def test_the_shipped_table_knows_conformance_images(image: str, entry_image: str) -> None:
    entry = match(SHIPPED, image)
    assert entry is not None and entry.image == entry_image


@pytest.mark.parametrize("image", ["registry.k8s.io/pause-other:1", "busyboxplus", "nginx", "example.com/busybox"])
def test_a_repository_match_is_exact_not_a_prefix(image: str) -> None:
    assert match(SHIPPED, image) is None


def test_a_glob_matches_repositories_and_the_first_entry_wins() -> None:
    table = (ImageEntry(image="example.com/*", cmd=("a",)), ImageEntry(image="example.com/x", cmd=("b",)))
    assert resolve(table, "example.com/x:1", [], []).argv == ["a"]


@pytest.mark.parametrize(
    ("command", "args", "argv"),
    [
        ([], [], ["/bin/tool", "--verbose", "serve", "--port=80"]),  # ENTRYPOINT + CMD
        (["/bin/other"], [], ["/bin/other"]),  # command replaces ENTRYPOINT, and CMD is dropped
        ([], ["check", "-x"], ["/bin/tool", "--verbose", "check", "-x"]),  # args replace CMD
        (["/bin/other"], ["-y"], ["/bin/other", "-y"]),  # command + args
    ],
)
def test_kubes_four_command_and_args_cases(command: list[str], args: list[str], argv: list[str]) -> None:
    assert resolve((TOOL,), "example.com/tool:1.0", command, args).argv == argv


def test_agnhost_is_the_built_peer_and_args_follow_it() -> None:
    image = "registry.k8s.io/e2e-test-images/agnhost:2.53"
    agnhost = str(peer_path("agnhost"))
    # the ENTRYPOINT runs the built peer under the image's name for it (programs print argv)
    assert resolve(SHIPPED, image, [], []).argv == ["/agnhost", "pause"]
    assert resolve(SHIPPED, image, [], []).executable == agnhost
    assert resolve(SHIPPED, image, [], ["netexec", "--http-port=8080"]).argv == [
        "/agnhost",
        "netexec",
        "--http-port=8080",
    ]
    assert resolve(SHIPPED, "registry.k8s.io/e2e-test-images/nginx:1.14-4", [], []).argv == [
        agnhost,
        "netexec",
        "--http-port=80",
    ]


def test_a_command_naming_agnhost_by_its_in_image_path_runs_the_peer_under_that_name() -> None:
    """Conformance's entrypoint tests run `/agnhost-2 entrypoint-tester ...`, which prints its own
    argv: the peer runs, argv[0] stays as the pod wrote it."""
    image = "registry.k8s.io/e2e-test-images/agnhost:2.53"
    got = resolve(SHIPPED, image, ["/agnhost-2", "entrypoint-tester", "override"], ["arguments"])
    assert got.argv == ["/agnhost-2", "entrypoint-tester", "override", "arguments"]
    assert got.executable == str(peer_path("agnhost"))
    assert resolve(SHIPPED, image, ["/agnhost", "pause"], []).executable == str(peer_path("agnhost"))
    assert resolve(SHIPPED, image, ["sh", "-c", "true"], []).executable == ""  # not one of its names


def test_an_unbuilt_agnhost_is_err_image_pull_naming_the_build() -> None:
    with pytest.raises(ImagePullError, match="raftkube peers build --only agnhost"):
        resolve(SHIPPED, "registry.k8s.io/e2e-test-images/agnhost:2.53", [], [], present=lambda p: False)


def test_busybox_runs_a_bare_applet_through_busybox() -> None:
    applets = {"/bin/busybox": frozenset({"sh", "sleep", "wget"})}.__getitem__

    def run(command: list[str], args: list[str]) -> tuple[list[str], str]:
        got = resolve(SHIPPED, "busybox", command, args, applets=applets, present=lambda p: p == "/bin/busybox")
        return got.argv, got.executable

    # busybox is the executable; argv[0] stays as written, and busybox picks the applet from it
    assert run([], []) == (["sh"], "/bin/busybox")
    assert run(["sh", "-c", "echo hi"], []) == (["sh", "-c", "echo hi"], "/bin/busybox")
    assert run([], ["sleep", "5"]) == (["sleep", "5"], "/bin/busybox")
    # not an applet: as written, by the host
    assert run(["python3", "-V"], []) == (["python3", "-V"], "")


def test_an_applets_path_in_the_image_runs_through_busybox() -> None:
    """In the image /bin/sh and /bin/sysctl are busybox: conformance's sysctl spec runs
    `/bin/sysctl` (this host's is /sbin's), its read-only root spec expects "/bin/sh: can't
    create /file" (this host's /bin/sh is dash).  A path outside the image's bin dirs, or not
    an applet, runs as written."""
    applets = {"/bin/busybox": frozenset({"sh", "sysctl"})}.__getitem__
    host = {"/bin/busybox", "/bin/sh"}.__contains__
    got = resolve(SHIPPED, "busybox", ["/bin/sysctl", "kernel.shm_rmid_forced"], [], applets=applets, present=host)
    assert (got.argv, got.executable) == (["/bin/sysctl", "kernel.shm_rmid_forced"], "/bin/busybox")
    got = resolve(SHIPPED, "busybox", ["/bin/sh", "-c", "x"], [], applets=applets, present=host)
    assert (got.argv, got.executable) == (["/bin/sh", "-c", "x"], "/bin/busybox")
    for path in ("/opt/sysctl", "/bin/python3"):
        assert resolve(SHIPPED, "busybox", [path], [], applets=applets, present=host).argv == [path]


def test_an_unknown_image_runs_its_command_or_is_err_image_pull_naming_the_table() -> None:
    assert resolve(SHIPPED, "example.com/app:1", ["sleep"], ["5"]).argv == ["sleep", "5"]
    assert resolve(SHIPPED, "example.com/app:1", ["sleep"], ["5"]).entry is None
    for args in ([], ["--flag"]):
        with pytest.raises(ImagePullError, match=r"example.com/app:1.*kubelets\.images in cluster\.toml"):
            resolve(SHIPPED, "example.com/app:1", [], args)


def test_the_image_env_and_working_dir_come_with_the_entry() -> None:
    entry = ImageEntry(image="x", cmd=("run",), env={"A": "1"}, working_dir="/srv")
    got = resolve((entry,), "x:2", [], [])
    assert (got.env, got.working_dir) == ({"A": "1"}, "/srv")


@pytest.mark.parametrize(
    ("items", "says"),
    [
        ({"image": "x"}, r"images must be an array of tables"),
        ([{"cmd": ["a"]}], r"images\[0\]\.image is required"),
        ([{"image": "x", "cmd": ["a"]}, {"image": "y"}], r"images\[1\] runs nothing"),
        ([{"image": "x:1.0", "cmd": ["a"]}], r"images\[0\]\.image must be a repository glob without tag"),
        ([{"image": "x@sha256:ab", "cmd": ["a"]}], r"images\[0\]\.image must be a repository glob"),
        ([{"image": "x", "cmd": "a"}], r"images\[0\]\.cmd must be an array of strings"),
        ([{"image": "x", "entrypoint": ["a", 1]}], r"images\[0\]\.entrypoint must be an array of strings"),
        ([{"image": "x", "peer": "nope"}], r"images\[0\]\.peer must be one of"),
        ([{"image": "x", "cmd": ["sh"], "applets_peer": "nope"}], r"images\[0\]\.applets_peer must be one of"),
        ([{"image": "x", "cmd": ["a"], "env": {"A": 1}}], r"images\[0\]\.env must be a table of strings"),
        ([{"image": "x", "cmd": ["a"], "working_dir": "rel"}], r"images\[0\]\.working_dir must be an absolute path"),
        ([{"image": "x", "cmd": ["a"], "tag": "1"}], r"images\[0\] has unknown keys: tag"),
        (["x"], r"images\[0\] must be a table"),
    ],
)
def test_bad_entries_are_refused_naming_the_key(items: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_entries(items, "kubelets.images")


def test_entries_round_trip_through_their_json_form() -> None:
    entries = (
        ImageEntry(image="example.com/*", entrypoint=("/bin/a",), cmd=("b",), env={"K": "v"}, working_dir="/w"),
        ImageEntry(image="busybox", cmd=("sh",), applets="/bin/busybox"),
        ImageEntry(image="registry.k8s.io/e2e-test-images/agnhost", peer="agnhost", programs=("/agnhost",)),
    )
    assert parse_entries(unparse(entries), "x") == entries


def test_host_image_ids_are_the_repository_and_the_programs_sha256(tmp_path: Path) -> None:
    program = tmp_path / "prog"
    program.write_bytes(b"#!/bin/sh\n")
    program.chmod(0o755)
    got = HostImages().image_id("docker.io/library/busybox:1.36", [str(program)])
    assert got == "busybox@sha256:" + __import__("hashlib").sha256(b"#!/bin/sh\n").hexdigest()
    assert HostImages().image_id("x", [str(tmp_path / "absent")]) == ""


def test_cluster_toml_entries_are_checked_and_handed_to_the_kubelets(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text('[kubelets]\n[[kubelets.images]]\nimage = "example.com/app:1"\ncmd = ["run"]\n')
    with pytest.raises(ConfigError, match=r"cluster.toml: kubelets.images\[0\]\.image must be a repository glob"):
        load_kubelet_settings(path)
    path.write_text("[kubelets]\nimages = 3\n")
    with pytest.raises(ConfigError, match=r"kubelets.images must be an array of tables"):
        load_kubelet_settings(path)
    path.write_text('[[kubelets.images]]\nimage = "example.com/app"\nentrypoint = ["/bin/app"]\n')
    settings = load_kubelet_settings(path)
    assert settings.images == (ImageEntry(image="example.com/app", entrypoint=("/bin/app",)),)
    flag, table = settings.image_args()
    assert flag == "--images" and image_table(table).resolve("example.com/app:2", [], ["-v"]).argv == ["/bin/app", "-v"]
    assert KubeletSettings().image_args() == ()


def test_a_built_upstream_busybox_stands_in_for_debians() -> None:
    """Upstream busybox's sh passes on environment variables that are not shell names (a
    ConfigMap's `data-1`), as the image's does; Debian's drops them.  Once built it runs the
    busybox images' applets; before, Debian's does (our tests and CI build no peer)."""
    upstream = str(peer_path("busybox"))
    applets = {"/bin/busybox": frozenset({"sh"}), upstream: frozenset({"sh", "env"})}.__getitem__
    for image in ("busybox:1.36", "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"):
        built = resolve(SHIPPED, image, ["sh", "-c", "env"], [], applets=applets, present=lambda p: True)
        assert built.executable == upstream
        debian = resolve(SHIPPED, image, [], [], applets=applets, present=lambda p: p == "/bin/busybox")
        assert (debian.argv, debian.executable) == (["sh"], "/bin/busybox")


def test_nonewprivs_runs_the_built_peer_under_its_in_image_name() -> None:
    """Conformance's allowPrivilegeEscalation specs run the image's CMD, `nnp`, which prints its
    effective uid: the built (setuid) peer runs, named as in the image."""
    got = resolve(SHIPPED, "registry.k8s.io/e2e-test-images/nonewprivs:1.3", [], [])
    assert got.argv == ["/usr/local/bin/nnp"] and got.executable == str(peer_path("nonewprivs"))


def test_update_demos_images_are_agnhost_serving_their_own_files() -> None:
    """kubectl's Update Demo reads /data.json from nautilus and kitten pods through pods/proxy:
    agnhost's test-webserver serves the image's root, where each image adds its files."""
    folder = image_files_dir("agnhost")
    for demo in ("nautilus", "kitten"):
        got = resolve(SHIPPED, f"registry.k8s.io/e2e-test-images/{demo}:1.7", [], [])
        assert got.argv == ["/agnhost", "test-webserver"] and got.executable == str(peer_path("agnhost"))
        assert (str(folder / demo / "data.json"), "/data.json") in got.files
        assert (str(folder / "localhost.crt"), "/localhost.crt") in got.files  # its base image's


def test_httpd_is_busyboxs_httpd_over_the_images_own_web_root() -> None:
    """Conformance's StatefulSet specs make an httpd pod unready by moving its web root's
    index.html away: busybox's httpd serves the image's DocumentRoot, of which each run gets a
    writable copy of the image's index.html."""
    applets = {"/bin/busybox": frozenset({"sh", "httpd"})}.__getitem__
    got = resolve(
        SHIPPED,
        "registry.k8s.io/e2e-test-images/httpd:2.4.38-4",
        [],
        [],
        applets=applets,
        present=lambda p: p == "/bin/busybox",
    )
    assert (got.argv, got.executable) == (["httpd", "-f", "-p", "80", "-h", HTTPD_ROOT], "/bin/busybox")
    assert [path for path, _ in got.writable] == [f"{HTTPD_ROOT}/index.html"]
    assert "It works!" in got.writable[0][1]


def test_the_aggregator_specs_images_run_the_built_sample_apiserver_and_etcd() -> None:
    """Conformance's Aggregator spec runs the sample-apiserver image with args only and the etcd
    image by its command; etcd's data stays in the run's own directory."""
    got = resolve(SHIPPED, "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2", [], ["--etcd-servers=x"])
    assert got.argv == ["/sample-apiserver", "--etcd-servers=x"] and got.executable == str(
        peer_path("sample-apiserver")
    )
    etcd = resolve(SHIPPED, "registry.k8s.io/etcd:3.5.21-0", ["/usr/local/bin/etcd", "--listen-client-urls", "u"], [])
    assert etcd.argv[0] == "/usr/local/bin/etcd" and etcd.executable == str(peer_path("etcd"))
    assert etcd.working_dir == "/var/lib/etcd" and etcd.writable == (("/var/lib/etcd/", ""),)
