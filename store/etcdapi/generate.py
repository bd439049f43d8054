"""Dev script: etcd's published `.proto` files -> `etcd.desc`, the descriptors the etcd API
front loads at run time.

    python -m store.etcdapi.generate [--version v3.6.17] [--module-dir DIR]

The message definitions are etcd's own (go.etcd.io/etcd/api/v3: etcdserverpb/rpc.proto,
mvccpb/kv.proto, authpb/auth.proto), fetched through the Go module proxy with
`go mod download` (or read from `--module-dir`, an unpacked module).  Their options are for
Go code generators and the HTTP gateway (gogoproto, google.api.http, openapiv2, etcd's
versionpb annotations) and change nothing on the wire, so they are stripped, with the imports
that define them, before protoc (grpcio-tools: `pip install 'raftkube[genproto]'`) compiles
the three files into one serialized FileDescriptorSet.

Why descriptors rather than generated `_pb2.py` modules: generated code is tied to the
protobuf version that generated it; a descriptor set is read by any protobuf runtime
(`store.etcdapi.messages` builds the classes from it), so the checked-in artifact never has to
be regenerated for a protobuf upgrade, only for a new etcd API.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "etcd.desc"
MODULE = "go.etcd.io/etcd/api/v3"
VERSION = "v3.6.17"  # the etcd 3.6 peer's (machinery/process/peers.py)
FILES = ("mvccpb/kv.proto", "authpb/auth.proto", "etcdserverpb/rpc.proto")
IMPORT_PREFIX = "etcd/api/"  # how rpc.proto imports its siblings (etcd's scripts/genproto.sh)


def module_dir(version: str) -> Path:
    """The unpacked module, downloaded through the Go module proxy when not yet in the cache."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"go mod download {MODULE}@{version} failed: {done.stderr.strip() or done.stdout.strip()}")
    return Path(json.loads(done.stdout)["Dir"])


def _without_comments(text: str) -> str:
    """The file with `//` and `/* */` comments blanked (strings kept: they may hold slashes)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _balanced_end(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(f"unbalanced {open_}{close} from offset {start}")


def strip_options(text: str) -> str:
    """The proto file without custom options (`option (x) = ...;` statements, with `{...}`
    values, and `[(x) = ...]` field options) and without the imports only they needed."""
    text = _without_comments(text)
    out, i = [], 0
    statement = re.compile(r"option\s*\(")
    field_opts = re.compile(r"\[\s*\(")
    while i < len(text):
        m_stmt, m_field = statement.search(text, i), field_opts.search(text, i)
        m = min((x for x in (m_stmt, m_field) if x), key=lambda x: x.start(), default=None)
        if m is None:
            out.append(text[i:])
            break
        out.append(text[i : m.start()])
        if m is m_field:
            i = _balanced_end(text, m.start(), "[", "]")
            continue
        brace, semi = text.find("{", m.end()), text.find(";", m.end())
        i = _balanced_end(text, brace, "{", "}") if 0 <= brace < semi else semi
        i = text.find(";", i) + 1 if text[i:].lstrip().startswith(";") else i
    kept = []
    for line in "".join(out).splitlines():
        imported = re.match(r'\s*import\s+"([^"]+)"\s*;', line)
        if imported and not imported.group(1).startswith(IMPORT_PREFIX):
            continue
        if imported and imported.group(1).startswith(IMPORT_PREFIX + "versionpb/"):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def build(source: Path, out: Path = OUT) -> None:
    from grpc_tools import protoc  # noqa: PLC0415  (a dev dependency: only this script needs it)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel in FILES:
            target = root / IMPORT_PREFIX / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(strip_options((source / rel).read_text()))
        args = ["protoc", f"-I{root}", "--include_imports", f"--descriptor_set_out={out}"]
        args += [IMPORT_PREFIX + rel for rel in FILES]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed (see above)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m store.etcdapi.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", default=VERSION, help=f"the etcd API module version (default {VERSION})")
    p.add_argument("--module-dir", type=Path, help="an unpacked go.etcd.io/etcd/api/v3 module instead of downloading")
    args = p.parse_args(argv)
    build(args.module_dir or module_dir(args.version))
    print(f"wrote {OUT} from {MODULE}@{args.version}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
