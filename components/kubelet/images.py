"""The kubelet's image table: what a container's image means when containers are processes.

Our kubelet pulls no image; it runs a container as a process on the node.  Conformance pods
name images and often give only `args` (or nothing), so each known image stands for what its
ENTRYPOINT and CMD would have run: the pause image an idle process, agnhost the built agnhost,
busybox the built upstream busybox (Debian's /bin/busybox until it is built).  `resolve`
turns (image, command, args) into the argv to run the way a container runtime does (kube's
"Define a Command and Arguments for a Container"):

    command  args   runs
    -        -      ENTRYPOINT + CMD
    given    -      command           (the image's CMD is dropped too)
    -        given  ENTRYPOINT + args
    given    given  command + args

Matching: an entry's `image` is a glob (fnmatch, case-sensitive) over the reference's
*repository*, the tag and digest dropped, Docker Hub names in their short form
(`docker.io/library/busybox:1.36` is `busybox`).  The first matching entry wins; the
cluster.toml entries ([[kubelets.images]]) come before the shipped ones, so they override them.
A pod whose container has a `command` runs it whatever its image (as before the table); one
with an unknown image and no command cannot be run: `ImagePullError` (kube's ErrImagePull).

An entry whose `applets` names a multi-call binary (busybox) runs a first word that is one of
its applets, bare (`sh`) or at its path in the image (`/bin/sh`, `/bin/sysctl`), through it, as
inside the image, where /bin/sh *is* busybox: the binary is the executable and argv[0] stays as
written, so busybox picks the applet from it and its messages name it as the image's would
("/bin/sh: can't create /file: Read-only file system"; the host's /bin/sh may be another
shell, and a host's sysctl may be /sbin's).  This module is pure: what exists on the host, the applet
list and the binaries' digests come from `HostImages` (the one place with I/O) or the caller.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from machinery.process.peers import ALL_PEERS, image_files_dir, peer_path

TABLE_KEY = "kubelets.images"
"""Where a user extends the table (cluster.toml); error messages name it."""

_PAUSE = (
    "import os, signal\n"
    "for s in (signal.SIGINT, signal.SIGTERM): signal.signal(s, lambda *_: os._exit(0))\n"
    "while True: signal.pause()\n"
)
"""The idle process the pause image stands for: sleeps until signalled, exits 0 on TERM/INT
as /pause does (`sleep infinity` would report 143 for every deleted pod)."""


class ImagePullError(Exception):
    """The image cannot be run here (kube's ErrImagePull); the message says why."""


@dataclass(frozen=True, kw_only=True)
class ImageEntry:
    image: str
    """A glob over the image repository (no tag, no digest), like `registry.k8s.io/pause`."""
    entrypoint: tuple[str, ...] = ()
    """The image's ENTRYPOINT as it runs here."""
    cmd: tuple[str, ...] = ()
    """The image's CMD: the default arguments, replaced by a container's args."""
    peer: str = ""
    """A built upstream peer (`raftkube peers build`) that starts the entrypoint, e.g. agnhost."""
    applets: str = ""
    """A multi-call binary (/bin/busybox) that runs a bare first word that is one of its applets."""
    applets_peer: str = ""
    """A built peer that, once built, is the multi-call binary instead of `applets`: upstream
    busybox, whose sh passes on environment variables that are not shell names (`data-1`), as
    the image's does; Debian's is patched to drop them.  Until it is built, `applets` serves
    (our own tests and CI build no peer); `raftkube conformance` requires it."""
    programs: tuple[str, ...] = ()
    """Paths inside the image that are the entry's peer (agnhost's `/agnhost`, `/agnhost-2`): a
    command naming one runs the peer, with argv[0] as written (programs print it)."""
    working_dir: str = ""
    """The image's WORKDIR (a container's workingDir wins)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The image's ENV (a container's env wins)."""
    files: tuple[tuple[str, str], ...] = ()
    """(path in the image, file name in the peer's `<peer>-files/` folder): files of the image
    its program reads, bound read-only at their paths (agnhost's /localhost.crt and .key, the
    certificate its netexec serves HTTPS with); `raftkube peers build` puts them there."""
    writable: tuple[tuple[str, str], ...] = ()
    """(path in the image, its text): files of the image a container changes, each run given
    its own writable copy of their directories (image_dirs.py): httpd's web root, whose
    index.html conformance's StatefulSet specs move away to make a pod unready.  A path ending
    in `/` is an empty directory of its own (etcd's data)."""

    def entry_argv(self) -> list[str]:
        return ([str(peer_path(self.peer))] if self.peer else []) + list(self.entrypoint)

    def host_files(self) -> tuple[tuple[str, str], ...]:
        """(host file, path in the image) of each of its `files`."""
        folder = image_files_dir(self.peer) if self.peer else Path("/nonexistent")
        return tuple((str(folder / name), target) for target, name in self.files)


HTTPD_ROOT = "/usr/local/apache2/htdocs"
"""The httpd image's DocumentRoot."""
ETCD_DIR = "/var/lib/etcd"
"""Where the etcd image's etcd keeps its data here (its working dir)."""

AGNHOST_FILES = (("/localhost.crt", "localhost.crt"), ("/localhost.key", "localhost.key"))
"""agnhost's Dockerfile: ADD porter/localhost.crt localhost.crt (and .key), at the image's root."""


SHIPPED: tuple[ImageEntry, ...] = (
    ImageEntry(image="registry.k8s.io/pause", entrypoint=("python3", "-I", "-S", "-c", _PAUSE)),
    # agnhost's Dockerfile: ENTRYPOINT ["/agnhost"], CMD ["pause"]
    # (and a second name, /agnhost-2, which conformance's entrypoint tests run)
    ImageEntry(
        image="registry.k8s.io/e2e-test-images/agnhost",
        peer="agnhost",
        cmd=("pause",),
        programs=("/agnhost", "/agnhost-2"),
        files=AGNHOST_FILES,
    ),
    # nonewprivs' Dockerfile: COPY nnp /usr/local/bin/nnp (setuid root), CMD ["nnp"]: it prints its
    # effective uid, root unless allowPrivilegeEscalation is false
    ImageEntry(
        image="registry.k8s.io/e2e-test-images/nonewprivs",
        peer="nonewprivs",
        programs=("/usr/local/bin/nnp", "nnp"),
    ),
    # nautilus and kitten (kubectl's Update Demo): agnhost with CMD ["test-webserver"], which serves
    # the image's root, where each adds its data.json and picture
    *(
        ImageEntry(
            image=f"registry.k8s.io/e2e-test-images/{demo}",
            peer="agnhost",
            cmd=("test-webserver",),
            programs=("/agnhost", "/agnhost-2"),
            files=(*AGNHOST_FILES, ("/data.json", f"{demo}/data.json"), (f"/{demo}.jpg", f"{demo}/{demo}.jpg")),
        )
        for demo in ("nautilus", "kitten")
    ),
    # busybox: no ENTRYPOINT, CMD ["sh"]
    ImageEntry(image="busybox", cmd=("sh",), applets="/bin/busybox", applets_peer="busybox"),
    ImageEntry(
        image="registry.k8s.io/e2e-test-images/busybox", cmd=("sh",), applets="/bin/busybox", applets_peer="busybox"
    ),
    # the e2e httpd image serves its web root's files on port 80 (CMD ["httpd-foreground"]):
    # busybox's httpd does, over the image's index.html, which specs move away and back
    ImageEntry(
        image="registry.k8s.io/e2e-test-images/httpd",
        cmd=("httpd", "-f", "-p", "80", "-h", HTTPD_ROOT),
        applets="/bin/busybox",
        applets_peer="busybox",
        writable=((f"{HTTPD_ROOT}/index.html", "<html><body><h1>It works!</h1></body></html>\n"),),
    ),
    # sample-apiserver's Dockerfile: ADD sample-apiserver /sample-apiserver, ENTRYPOINT
    # ["/sample-apiserver"] (conformance's Aggregator spec; built from k8s.io/sample-apiserver)
    ImageEntry(
        image="registry.k8s.io/e2e-test-images/sample-apiserver",
        peer="sample-apiserver",
        programs=("/sample-apiserver",),
    ),
    # the etcd image: /usr/local/bin/etcd, run by its command (the sample-apiserver's storage);
    # the etcd 3.6 peer stands in for 3.5, keeping its default data dir (default.etcd in the
    # working dir) in the run's own writable directory, not on the node's root
    ImageEntry(
        image="registry.k8s.io/etcd",
        peer="etcd",
        programs=("/usr/local/bin/etcd", "etcd"),
        working_dir=ETCD_DIR,
        writable=((f"{ETCD_DIR}/", ""),),
    ),
    # the e2e nginx image serves HTTP on port 80: agnhost's netexec does the same
    ImageEntry(image="registry.k8s.io/e2e-test-images/nginx", peer="agnhost", entrypoint=("netexec", "--http-port=80")),
)


@dataclass(frozen=True)
class Resolved:
    argv: list[str]
    env: dict[str, str]
    """The image's ENV (the container's is laid over it)."""
    working_dir: str
    """The image's WORKDIR ("": none)."""
    entry: ImageEntry | None
    """The table entry used (None: an unknown image whose container has a command)."""
    executable: str = ""
    """The host program to run when argv[0] is an in-image path of the entry's peer ("": argv[0])."""
    files: tuple[tuple[str, str], ...] = ()
    """(host file, path in the image) to bind read-only in the container (ImageEntry.files)."""
    writable: tuple[tuple[str, str], ...] = ()
    """(path in the image, text) of the files each run gets a writable copy of (ImageEntry.writable)."""


_HUB_PREFIXES = ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/")


def repository(reference: str) -> str:
    """`reference` without its digest and tag, Docker Hub names short:
    `docker.io/library/busybox:1.36@sha256:ab..` -> `busybox`."""
    name = reference.partition("@")[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:  # a colon before the last slash is a registry's port
        name = name[:colon]
    for prefix in _HUB_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def match(table: tuple[ImageEntry, ...], image: str) -> ImageEntry | None:
    """The first entry whose glob matches the image's repository."""
    repo = repository(image)
    return next((e for e in table if fnmatchcase(repo, repository(e.image))), None)


def resolve(
    table: tuple[ImageEntry, ...],
    image: str,
    command: list[str],
    args: list[str],
    *,
    applets: Callable[[str], frozenset[str]] = lambda binary: frozenset(),
    present: Callable[[str], bool] = lambda program: True,
    file_exists: Callable[[str], bool] = lambda path: True,
) -> Resolved:
    """The argv (and the image's env and working dir) a container runs; ImagePullError when
    the image is not in the table and the container has no command, or the program its entry
    names is not on this host.  `applets(binary)`: the applets of a multi-call binary;
    `present(program)`: whether a program (a path or a name on PATH) exists; `file_exists(path)`:
    whether an image file is there."""
    entry = match(table, image)
    if entry is None:
        if not command:
            raise ImagePullError(
                f"image {image!r} is not in the kubelet's image table ({TABLE_KEY} in cluster.toml),"
                " and the container has no command to run instead"
            )
        return Resolved([*command, *args], {}, "", None)
    if entry.peer and not (
        present(str(peer_path(entry.peer))) and all(file_exists(host) for host, _ in entry.host_files())
    ):
        raise ImagePullError(
            f"image {image!r} runs {entry.peer} ({peer_path(entry.peer)}), which is not built"
            f"{' with its image files' if entry.files else ''}: run `raftkube peers build --only {entry.peer}`"
        )
    multicall = entry.applets
    if entry.applets_peer and present(str(peer_path(entry.applets_peer))):
        multicall = str(peer_path(entry.applets_peer))
    if multicall and not present(multicall):
        raise ImagePullError(f"image {image!r} runs {multicall} ({TABLE_KEY}), which is not on this host")
    argv = [*command, *args] if command else [*entry.entry_argv(), *(args or entry.cmd)]
    if not argv:
        raise ImagePullError(f"image {image!r} has neither an entrypoint nor a command in {TABLE_KEY}")
    if multicall and _is_applet(argv[0], applets(multicall)):
        return Resolved(argv, dict(entry.env), entry.working_dir, entry, multicall, entry.host_files(), entry.writable)
    executable = ""
    if entry.peer and entry.programs:
        if not command:
            argv[0] = entry.programs[0]  # the ENTRYPOINT runs under its in-image name, as in the image
        if argv[0] in entry.programs:
            executable = str(peer_path(entry.peer))
    return Resolved(argv, dict(entry.env), entry.working_dir, entry, executable, entry.host_files(), entry.writable)


APPLET_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin"})  # where busybox's image links its applets


def _is_applet(program: str, names: frozenset[str]) -> bool:
    """Whether a container of a multi-call binary's image runs `program` as one of its applets:
    a bare applet name, or an applet's path in the image (`/bin/sh`, `/bin/sysctl`)."""
    if "/" not in program:
        return program in names
    directory, name = os.path.split(program)
    return directory in APPLET_DIRS and name in names


# -- the table as a user writes it ----------------------------------------------------------------

_LIST_KEYS = ("entrypoint", "cmd", "programs")
_TEXT_KEYS = ("image", "peer", "applets", "applets_peer", "working_dir")
PEERS = ALL_PEERS


def parse_entries(items: Any, where: str) -> tuple[ImageEntry, ...]:
    """Entries from their TOML/JSON form (a list of tables); ValueError names `where[i].key`."""
    if not isinstance(items, list):
        raise ValueError(f"{where} must be an array of tables ([[{TABLE_KEY}]]), got {items!r}")
    return tuple(_entry(item, f"{where}[{i}]") for i, item in enumerate(items))


def _entry(item: Any, where: str) -> ImageEntry:
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be a table, got {item!r}")
    unknown = sorted(set(item) - {*_LIST_KEYS, *_TEXT_KEYS, "env"})
    if unknown:
        raise ValueError(f"{where} has unknown keys: {', '.join(map(str, unknown))}")
    values: dict[str, Any] = {}
    for key in _TEXT_KEYS:
        if key in item:
            if not isinstance(item[key], str) or not item[key]:
                raise ValueError(f"{where}.{key} must be a non-empty string, got {item[key]!r}")
            values[key] = item[key]
    for key in _LIST_KEYS:
        if key in item:
            words = item[key]
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise ValueError(f"{where}.{key} must be an array of strings, got {words!r}")
            values[key] = tuple(words)
    if "env" in item:
        env = item["env"]
        strings = isinstance(env, dict) and all(isinstance(k, str) and k and isinstance(v, str) for k, v in env.items())
        if not strings:
            raise ValueError(f"{where}.env must be a table of strings, got {env!r}")
        values["env"] = dict(env)
    if "image" not in values:
        raise ValueError(f"{where}.image is required (a repository glob like registry.k8s.io/pause)")
    if values["image"] != values["image"].strip() or any(c in values["image"] for c in "@ \t\n"):
        raise ValueError(f"{where}.image must be a repository glob without tag or digest, got {values['image']!r}")
    if repository(values["image"]) != values["image"] and not values["image"].startswith(_HUB_PREFIXES):
        raise ValueError(f"{where}.image must be a repository glob without tag or digest, got {values['image']!r}")
    for key in ("peer", "applets_peer"):
        if key in values and values[key] not in PEERS:
            raise ValueError(f"{where}.{key} must be one of {', '.join(PEERS)}, got {values[key]!r}")
    for key in ("applets", "working_dir"):
        if key in values and not values[key].startswith("/"):
            raise ValueError(f"{where}.{key} must be an absolute path, got {values[key]!r}")
    if not (values.get("entrypoint") or values.get("cmd") or values.get("peer")):
        raise ValueError(f"{where} runs nothing: give it an entrypoint, a cmd or a peer")
    return ImageEntry(**values)


def unparse(entries: tuple[ImageEntry, ...]) -> list[dict[str, Any]]:
    """The inverse of `parse_entries` (what `raftkube up` hands each kubelet)."""
    out = []
    for e in entries:
        item: dict[str, Any] = {"image": e.image}
        for key in _TEXT_KEYS[1:]:
            if getattr(e, key):
                item[key] = getattr(e, key)
        for key in _LIST_KEYS:
            if getattr(e, key):
                item[key] = list(getattr(e, key))
        if e.env:
            item["env"] = dict(e.env)
        out.append(item)
    return out


# -- the host side ------------------------------------------------------------------------------


class HostImages:
    """The table against this host: which programs exist, a multi-call binary's applets (asked
    once), and each image's ID (the sha256 of the program that runs, by path, size and mtime)."""

    def __init__(self, extra: tuple[ImageEntry, ...] = ()) -> None:
        self.table = extra + SHIPPED
        self._applets: dict[str, frozenset[str]] = {}
        self._digests: dict[tuple[str, int, int], str] = {}

    def resolve(self, image: str, command: list[str], args: list[str]) -> Resolved:
        return resolve(
            self.table, image, command, args, applets=self.applets, present=_present, file_exists=os.path.isfile
        )

    def applets(self, binary: str) -> frozenset[str]:
        if binary not in self._applets:
            try:
                out = subprocess.run([binary, "--list"], capture_output=True, timeout=5, check=True).stdout
                self._applets[binary] = frozenset(out.decode(errors="replace").split())
            except (OSError, subprocess.SubprocessError):
                self._applets[binary] = frozenset()
        return self._applets[binary]

    def image_id(self, image: str, argv: list[str]) -> str:
        """kube's `<repository>@sha256:<digest>`, the digest of the binary that runs ("" when
        it cannot be read)."""
        program = shutil.which(argv[0]) if argv else None
        if program is None:
            return ""
        try:
            st = os.stat(program)
            key = (program, st.st_size, st.st_mtime_ns)
            if key not in self._digests:
                with open(program, "rb") as f:
                    self._digests[key] = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return ""
        return f"{repository(image)}@sha256:{self._digests[key]}"


def _present(program: str) -> bool:
    return shutil.which(program) is not None if "/" not in program else os.access(Path(program), os.X_OK)
