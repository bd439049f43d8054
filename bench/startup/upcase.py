"""How long `raftkube up` takes to a working cluster: from the command's start until its two
kubelets' Nodes are Ready (what a user waits for before `kubectl apply`), on a new data dir
with free ports and the repository's cluster.toml otherwise.  `raftkube down` afterwards; its
time is reported too."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from apiserver.launcher import LocalApiserver
from bench.store.progress import Progress

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120.0


def _raftkube(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "components.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT, check=False)


def _nodes_ready(data_dir: Path, names: set[str]) -> bool:
    apiserver = LocalApiserver(data_dir)
    endpoint = apiserver.recorded()
    token = apiserver.pki.admin_token()
    if endpoint is None or token is None:
        return False
    ctx = ssl.create_default_context(cafile=str(apiserver.pki.ca))
    ctx.check_hostname = False
    request = urllib.request.Request(f"{endpoint.url}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=5) as r:
            nodes = json.loads(r.read())["items"]
    except OSError:
        return False
    ready = {
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions") or ())
    }
    return names <= ready


def run(root: Path, config: Path, progress: Progress) -> dict[str, Any]:
    progress.start("raftkube up to Ready nodes")
    data_dir = root / "up"
    t0 = time.monotonic()
    up = _raftkube("up", "--detach", "--free-ports", "--data-dir", str(data_dir), "--config", str(config))
    returned = time.monotonic() - t0
    try:
        if up.returncode != 0:
            raise RuntimeError(f"raftkube up failed ({up.returncode}): {up.stderr[-500:]}")
        deadline = t0 + TIMEOUT_S
        while not _nodes_ready(data_dir, {"node-1", "node-2"}):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node-1 and node-2 not Ready within {TIMEOUT_S:.0f}s")
            time.sleep(0.05)
        ready = time.monotonic() - t0
    finally:
        t1 = time.monotonic()
        down = _raftkube("down", "--data-dir", str(data_dir))
        down_s = time.monotonic() - t1
    progress.end(f"up returned in {returned:.1f}s, nodes Ready after {ready:.1f}s; down took {down_s:.1f}s")
    return {
        "up_returned_s": returned,
        "nodes_ready_s": ready,
        "down_s": down_s,
        "down_ok": down.returncode == 0,
        "what": "3 store members, apiserver, scheduler, controller-manager, 2 kubelets (cluster.toml, free ports)",
    }
