"""Where the local apiserver listens, as `raftkube up` records it in `<data_dir>/apiserver/apiserver.json`.

Its own module so that both the launcher (which writes the record) and the credentials
(`apiserver.pki`, whose component kubeconfigs name the server) read it without importing
each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RECORD_FILE = "apiserver.json"


@dataclass(frozen=True)
class Endpoint:
    """Where the apiserver listens, and the storage URL it was given ("" = the data dir's store)."""

    host: str
    port: int
    storage: str = ""

    @property
    def dial_host(self) -> str:
        """The address clients dial: a wildcard listener is reached on 127.0.0.1."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "[::]") else self.host

    @property
    def url(self) -> str:
        host = self.dial_host
        return f"https://[{host}]:{self.port}" if ":" in host else f"https://{host}:{self.port}"


class RecordError(ValueError):
    """The record exists but cannot be read; the message names the file."""


def read_record(path: Path) -> Endpoint | None:
    """The endpoint recorded in `path`, None when there is no record."""
    try:
        doc = json.loads(path.read_text())
        return Endpoint(str(doc["host"]), int(doc["port"]), str(doc.get("storage", "")))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise RecordError(f"{path} is damaged ({e}); remove it and run `raftkube up` again") from e
