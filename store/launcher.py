"""Starting, finding and stopping a local store cluster: one OS process per member.

Layout under the data dir (default `.raftkube/`):

    store/cluster.json          cluster id and members (id, name, urls, directory)
    store/member-N/member.json  the member's own configuration (read by the process)
    store/member-N/pid          pid of the running process (absent when stopped)
    store/member-N/member.log   its stdout and stderr
    store/member-N/wal/, snap/  its durable state
    store/member-N/tls/         its certificate and key, and the cluster CA's certificate
    store/pki/                  the cluster CA (ca.crt, ca.key) and the admin client's
                                certificate (admin.crt, admin.key): what the CLI uses

Unless the cluster is created `insecure`, every member speaks only mutual TLS: peers with
member certificates, clients with any certificate the cluster CA signed.

Every directory the launcher or a member creates there is 0700 and every file 0600, whatever
the umask (machinery.process.disk), but certificates (public, 0644: machinery.process.pki) in
those 0700 directories;
`store up` refuses a data dir, or its store/, that group or others can write (`check_private`).

Each member runs in its own process group, so signals aimed at one member (kill, pause)
never reach the launcher or the other members.

Members are started and stopped by pid file as every local process is
(machinery.process.launch); `kill_member` marks the member stopped on purpose, so that a
supervisor leaves it down until it is started again.

With `hosts = "netns"` each member runs on a host of its own (machinery/process/hosts.py):
member i in a network namespace `m<i>` with the (10+i)th address of `hosts_subnet`, every one
on the same ports, its certificate naming that address.  cluster.json records it ("hosts");
a member's host is made when it starts, and every host goes when all are stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import signal
import sys
import time
from typing import Any

from machinery.process import disk, pki
from machinery.process.config import ConfigError
from machinery.process.hosts import HostNetwork, HostsError, can_make_hosts
from machinery.process.launch import (
    LauncherError,
    mark_stopped,
    part_lock,
    port_free,
    read_pid,
    reap,
    spawn,
    stop_process,
    stop_processes,
)
from store.api.cluster import MemberInfo
from store.api.protocol import split_url
from store.client.layout import CLIENT_NAME, StoreLayout
from store.config import StoreSettings
from store.server.config import SETTINGS, MemberConfig, read_member_file, write_member_file

MEMBER_TLS_DIR = "tls"
"""In a member's directory; the member process reads the same name (store.server.member.TLS_DIR)."""


class LocalCluster(StoreLayout):
    """A store cluster whose members run as local processes under one data dir; where its files
    are, and reading them, is `StoreLayout`'s (which clients use without this module)."""

    # ------------------------------------------------------------------ layout (StoreLayout reads it)
    def check_private(self) -> None:
        """Refuse a data dir (or its store/ dir) that group or others can write: they could
        replace or remove the members' files.  The user's directory is never chmod-ed behind
        their back; those that the launcher creates itself are 0700 (machinery.process.disk.make_dirs)."""
        for d in (self.data_dir, self.root):
            try:
                mode = d.stat().st_mode & 0o777
            except FileNotFoundError:
                continue
            if mode & 0o022:
                who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if mode & bit)
                raise LauncherError(
                    f"{d} is writable by {who} (mode {mode:04o}), so other local users could replace "
                    f"the store's files; make it private (`chmod 700 {d}`) or choose another --data-dir"
                )

    def create(self, s: StoreSettings, ports: list[int] | None = None, insecure: bool = False) -> list[MemberInfo]:
        """Write the layout of a new cluster; `ports` (3 per member) overrides the port scheme.
        Unless `insecure`, create the cluster CA and every certificate too."""
        if s.members not in (1, 3, 5):
            raise ConfigError(f"members must be 1, 3 or 5, got {s.members}")
        if self.exists():
            raise LauncherError(f"{self.root} already holds a cluster")
        hosts = None
        if s.hosts == "netns":
            why = can_make_hosts()
            if why is not None:
                raise LauncherError(f'hosts = "netns": {why}')
            hosts = {"kind": "netns", "subnet": s.hosts_subnet}
        infos = []
        for i in range(1, s.members + 1):
            host = s.host
            if hosts is not None:  # a host of its own: the same ports as every other member
                host = str(HostNetwork(self.hosts_tag, s.hosts_subnet).address(i))
                c, p, h = s.client_port, s.client_port + 1, s.client_port + 2
            elif ports is not None:
                c, p, h = ports[3 * (i - 1) : 3 * i]
            else:
                c = s.client_port + 10000 * (i - 1)
                p, h = c + 1, c + 2
            infos.append(MemberInfo(i, f"m{i}", f"tcp://{host}:{p}", f"tcp://{host}:{c}", f"http://{host}:{h}", False))
        cluster_id = random.getrandbits(63)
        disk.make_dirs(self.root)
        ca = None if insecure else pki.create_ca(self.pki_dir)
        if ca is not None:
            pki.issue_client_cert(ca, self.pki_dir, CLIENT_NAME)
        for m in infos:
            cfg = self._member_config(m, infos, cluster_id, s.member_settings(), join=False, insecure=insecure)
            write_member_file(self.member_dir(m.id), cfg)
            if ca is not None:
                self._issue_member_cert(ca, m)
        self._write_cluster(cluster_id, infos, insecure, hosts)
        return infos

    def _issue_member_cert(self, ca: pki.CertFiles, m: MemberInfo) -> None:
        hosts = {split_url(u)[0] for u in (m.peer_url, m.client_url)} | {"localhost"}
        pki.issue_member_cert(ca, self.member_dir(m.id) / MEMBER_TLS_DIR, m.id, sorted(hosts))

    def _write_cluster(
        self, cluster_id: int, infos: list[MemberInfo], insecure: bool, hosts: dict[str, str] | None
    ) -> None:
        doc: dict[str, Any] = {"cluster_id": cluster_id, "insecure": insecure, "members": [m.to_json() for m in infos]}
        if hosts is not None:
            doc["hosts"] = hosts
        disk.write_private(self.cluster_file, (json.dumps(doc, indent=2) + "\n").encode())

    # ------------------------------------------------------------------ hosts
    @property
    def hosts_tag(self) -> str:
        """What this cluster's hosts are named after (two clusters never share one)."""
        return str(self.root.resolve())

    def host_network(self) -> HostNetwork | None:
        """The hosts the members run on, when each has its own (hosts = "netns")."""
        hosts = self.load().get("hosts")
        if not isinstance(hosts, dict) or hosts.get("kind") != "netns":
            return None
        try:
            return HostNetwork(self.hosts_tag, str(hosts.get("subnet")))
        except HostsError as e:
            raise LauncherError(f"{self.cluster_file}: {e}") from None

    @staticmethod
    def host_name(member_id: int) -> str:
        return f"m{member_id}"

    def new_member_urls(self, member_id: int | None = None) -> list[str] | None:
        """(peer, client, http) URLs for a member to be added (as `member_id`, when known), on a
        host of its own like the others; None when the members share a host (the caller picks
        ports).  Unknown, the ID is guessed as the cluster gives them, above every member this
        data dir ever held (removed ones included): the address is unused either way."""
        net = self.host_network()
        if net is None:
            return None
        if member_id is None:
            dirs = [int(d.name.removeprefix("member-")) for d in self.root.glob("member-*") if d.name[7:].isdigit()]
            member_id = max([*self.member_ids(), *dirs], default=0) + 1
        host = net.address(member_id)
        first = split_url(self.members()[0].client_url)[1]
        return [f"tcp://{host}:{first + 1}", f"tcp://{host}:{first}", f"http://{host}:{first + 2}"]

    def _member_config(
        self,
        m: MemberInfo,
        infos: list[MemberInfo],
        cluster_id: int,
        settings: dict[str, Any],
        join: bool,
        insecure: bool,
    ) -> MemberConfig:
        return MemberConfig(
            member_id=m.id,
            name=m.name,
            data_dir=self.member_dir(m.id),
            peer_url=m.peer_url,
            client_url=m.client_url,
            http_url=m.http_url,
            initial_cluster=infos,
            cluster_id=cluster_id,
            join=join,
            insecure=insecure,
            **settings,
        )

    def set_peer_dial(self, member_id: int, dial: dict[int, str]) -> None:
        """Make the member dial these URLs for these peers (e.g. fault-injecting proxies);
        read at its next start."""
        d = self.member_dir(member_id)
        try:
            cfg = read_member_file(d)
        except ValueError as e:
            raise LauncherError(str(e)) from e
        write_member_file(d, dataclasses.replace(cfg, peer_dial=dict(dial)))

    def add_member_layout(self, info: MemberInfo) -> None:
        """Record a member added at runtime (`member add`) so that it can be started here.

        It runs with the settings of the members already here (those of the cluster.toml the
        cluster was created from), not with the defaults."""
        doc = self.load()
        infos = self.members()
        all_infos = [*infos, info]
        insecure = self.insecure()
        settings = self._settings_of(infos)
        cfg = self._member_config(info, all_infos, doc["cluster_id"], settings, join=True, insecure=insecure)
        write_member_file(self.member_dir(info.id), cfg)
        if not insecure:
            self._issue_member_cert(pki.load_files(self.pki_dir, "ca"), info)
        self._write_cluster(doc["cluster_id"], all_infos, insecure, doc.get("hosts"))

    def _settings_of(self, infos: list[MemberInfo]) -> dict[str, Any]:
        """The settings in the first readable member.json of these members."""
        problems = []
        for m in infos:
            try:
                cfg = read_member_file(self.member_dir(m.id))
            except ValueError as e:
                problems.append(str(e))
                continue
            return {name: getattr(cfg, name) for name in SETTINGS}
        raise LauncherError(f"no member here to take the settings from: {'; '.join(problems) or 'no members'}")

    def forget_member(self, member_id: int) -> None:
        doc = self.load()
        infos = [m for m in self.members() if m.id != member_id]
        self._write_cluster(doc["cluster_id"], infos, bool(doc.get("insecure", False)), doc.get("hosts"))

    # ------------------------------------------------------------------ processes
    def pid(self, member_id: int) -> int | None:
        """The member's pid if its process is alive (a stale pid file is ignored)."""
        return read_pid(self.member_dir(member_id) / "pid")

    def start_member(self, member_id: int, env: dict[str, str] | None = None) -> int:
        """Start the member's process; `env` adds to (or overrides) our environment for it."""
        d = self.member_dir(member_id)
        if self.pid(member_id) is not None:
            raise LauncherError(f"member {member_id} is already running (pid {self.pid(member_id)})")
        try:
            cfg = read_member_file(d)
        except ValueError as e:
            raise LauncherError(str(e)) from e
        argv = [sys.executable, "-m", "store.server.main", str(d)]
        net = self.host_network()
        if net is None:
            for url in (cfg.client_url, cfg.peer_url, cfg.http_url):
                host, port = split_url(url)
                if not port_free(host, port):
                    raise LauncherError(f"member {member_id}: port {port} on {host} is in use ({url})")
        else:  # its own host, made (or repaired) now; its ports are its own
            try:
                net.ensure(self.host_name(member_id), split_url(cfg.client_url)[0])
            except HostsError as e:
                raise LauncherError(f"member {member_id}: {e}") from None
            argv = net.argv(self.host_name(member_id), argv)
        return spawn(argv, d / "member.log", d / "pid", env)

    def signal_member(self, member_id: int, sig: int) -> int:
        pid = self.pid(member_id)
        if pid is None:
            raise LauncherError(f"member {member_id} is not running")
        os.killpg(pid, sig)
        return pid

    def stop_member(self, member_id: int, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after `timeout`; True if it was running."""
        return stop_process(self.member_dir(member_id) / "pid", timeout)

    def kill_member(self, member_id: int) -> int:
        """SIGKILL it, marked stopped on purpose: a supervisor leaves it down until it is started."""
        pid_file = self.member_dir(member_id) / "pid"
        with part_lock(pid_file):
            if self.pid(member_id) is not None:
                mark_stopped(pid_file)
            pid = self.signal_member(member_id, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while self.pid(member_id) is not None and time.monotonic() < deadline:
            reap(pid)
            time.sleep(0.01)
        with contextlib.suppress(FileNotFoundError):
            (self.member_dir(member_id) / "pid").unlink()
        return pid

    def start_all(self, env: dict[str, str] | None = None) -> dict[int, int]:
        started = {}
        for mid in self.member_ids():
            if self.pid(mid) is None:
                started[mid] = self.start_member(mid, env)
        return started

    def stop_all(self, timeout: float = 10.0) -> list[int]:
        """Stop every member; on hosts of their own, the hosts go too (made again at start)."""
        ids = self.member_ids()
        ran = stop_processes([self.member_dir(mid) / "pid" for mid in ids], timeout)  # all at once
        stopped = [mid for mid, was_running in zip(ids, ran, strict=True) if was_running]
        net = self.host_network() if self.exists() else None
        if net is not None:
            try:
                net.remove_all()
            except HostsError as e:
                raise LauncherError(str(e)) from None
        return stopped
