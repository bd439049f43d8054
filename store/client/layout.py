"""Reading a local store cluster's layout under its data dir: its members, their client URLs and
the admin client's TLS files.  The launcher writes this layout (store.launcher.LocalCluster
builds on this class); a client that finds a local cluster by its data dir (`raftkube apiserver`'s
default --storage) reads it here, without linking the launcher or the server.

    store/cluster.json          cluster id and members (id, name, urls, directory)
    store/member-N/             a member's directory
    store/pki/                  the cluster CA and the admin client's certificate (admin.crt, admin.key)
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

from machinery.process import pki
from machinery.process.launch import LauncherError
from store.api.cluster import MemberInfo

CLUSTER_FILE = "cluster.json"
PKI_DIR = "pki"
CLIENT_NAME = "admin"


class StoreLayout:
    """The files of a store cluster under one data dir, read (never written) here."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.root = data_dir / "store"
        self.cluster_file = self.root / CLUSTER_FILE

    def exists(self) -> bool:
        return self.cluster_file.exists()

    def load(self) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads(self.cluster_file.read_text())
            return doc
        except FileNotFoundError as e:
            raise LauncherError(
                f"no cluster in {self.root.parent} (start one with `raftkube store up --data-dir {self.root.parent}`)"
            ) from e
        except json.JSONDecodeError as e:
            raise LauncherError(f"{self.cluster_file} is not valid JSON: {e}") from e

    def member_dir(self, member_id: int) -> Path:
        return self.root / f"member-{member_id}"

    def member_ids(self) -> list[int]:
        return [int(m["id"]) for m in self.load()["members"]]

    def members(self) -> list[MemberInfo]:
        return [
            MemberInfo(m["id"], m["name"], m["peer_url"], m["client_url"], m["http_url"], m.get("is_learner", False))
            for m in self.load()["members"]
        ]

    def client_urls(self) -> list[str]:
        return [m.client_url for m in self.members()]

    @property
    def pki_dir(self) -> Path:
        return self.root / PKI_DIR

    def insecure(self) -> bool:
        return bool(self.load().get("insecure", False))

    def client_tls(self) -> ssl.SSLContext | None:
        """TLS for a client of this cluster (the admin certificate); None when it is insecure.
        A PKIError names a missing or damaged file."""
        if self.insecure():
            return None
        files = pki.load_files(self.pki_dir, CLIENT_NAME)
        return pki.client_context(files.ca, files.cert, files.key)
