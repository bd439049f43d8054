"""Dev script: turn upstream `generated.proto` files and Go struct tags into our data files.

Kubernetes publishes its wire format as proto2 files (kubernetes/api, kubernetes/apimachinery)
but its JSON names and "is this field omitted when empty" rules live only in the Go struct
tags next to them (`json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=aPIGroup"`).  So
this script reads both, at one tag, and writes:

- `k8s.desc`: a serialized `FileDescriptorSet` with the upstream field numbers (our own parser
  of the proto2 subset those files use: package, import, option, message, optional/repeated
  scalar or message fields, map fields);
- `k8s_go.json`: per message, per field number, the Go JSON name and what Go's
  `encoding/json` does with the field (omitempty, pointer, slice, map, []byte, inline).

Regenerate (after `fetch` of the four repositories, or from git clones of them):

    python -m apiserver.protobuf.build_descriptors \\
        --api-git /path/kubernetes+api/repo --apimachinery-git /path/kubernetes+apimachinery/repo \\
        --apiextensions-git /path/kubernetes+apiextensions-apiserver/repo \\
        --aggregator-git /path/kubernetes+kube-aggregator/repo --ref v0.33.9

The `--ref` tag is the client-go/api release matching the Kubernetes minor we claim (1.33).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor_pb2

HERE = Path(__file__).resolve().parent

# (repository, package directory): the API groups the apiserver serves or is about to serve, and
# what they import.  Imports are followed, so only roots need listing.
ROOTS: tuple[tuple[str, str], ...] = (
    ("api", "core/v1"),
    ("api", "apps/v1"),
    ("api", "batch/v1"),
    ("api", "rbac/v1"),
    ("api", "coordination/v1"),
    ("api", "discovery/v1"),
    ("api", "events/v1"),
    ("api", "scheduling/v1"),
    ("api", "policy/v1"),
    ("api", "networking/v1"),
    ("api", "autoscaling/v1"),
    ("api", "autoscaling/v2"),
    ("api", "admissionregistration/v1"),
    ("api", "authentication/v1"),
    ("api", "authorization/v1"),
    ("api", "storage/v1"),
    ("api", "certificates/v1"),
    ("api", "node/v1"),
    ("api", "flowcontrol/v1"),
    ("apimachinery", "pkg/apis/meta/v1"),
    ("apiextensions-apiserver", "pkg/apis/apiextensions/v1"),
    ("kube-aggregator", "pkg/apis/apiregistration/v1"),
)

SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
}
LABELS = {
    "optional": descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    "repeated": descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    "required": descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,  # never enforced: Go ignores it too
}


class ParseError(Exception):
    pass


# -- proto2 subset -------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([A-Za-z_.][A-Za-z0-9_.]*)|(\d+)|([{}<>;=,]))')


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _tokens(text: str) -> list[str]:
    text = _strip_comments(text)
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ParseError(f"unexpected text at {text[pos : pos + 40]!r}")
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return out


class _Cursor:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self, expect: str | None = None) -> str:
        if self.i >= len(self.tokens):
            raise ParseError(f"unexpected end of file (expected {expect or 'more'})")
        tok = self.tokens[self.i]
        if expect is not None and tok != expect:
            raise ParseError(f"expected {expect!r}, found {tok!r}")
        self.i += 1
        return tok


def _entry_name(field_name: str) -> str:
    """protoc's name for a map field's entry message: `allocatable` -> `AllocatableEntry`."""
    return "".join(p[:1].upper() + p[1:] for p in field_name.split("_")) + "Entry"


def _type_ref(name: str, package: str) -> tuple[int, str]:
    if name in SCALARS:
        return SCALARS[name], ""
    full = name if name.startswith(".") else f".{package}.{name}"
    return descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE, full


def parse_proto(text: str, filename: str) -> descriptor_pb2.FileDescriptorProto:
    """One generated.proto as a FileDescriptorProto; anything outside the subset is an error."""
    cur = _Cursor(_tokens(text))
    fd = descriptor_pb2.FileDescriptorProto(name=filename)
    while cur.peek():
        tok = cur.take()
        if tok == "syntax":
            cur.take("=")
            fd.syntax = cur.take().strip('"')
            if fd.syntax != "proto2":
                raise ParseError(f"{filename}: only proto2 is supported, found {fd.syntax}")
            fd.ClearField("syntax")  # proto2 is the default and is written as no syntax at all
            cur.take(";")
        elif tok == "package":
            fd.package = cur.take()
            cur.take(";")
        elif tok == "import":
            fd.dependency.append(cur.take().strip('"'))
            cur.take(";")
        elif tok == "option":
            name = cur.take()
            cur.take("=")
            value = cur.take().strip('"')
            cur.take(";")
            if name == "go_package":
                fd.options.go_package = value
        elif tok == "message":
            fd.message_type.append(_parse_message(cur, fd.package))
        else:
            raise ParseError(f"{filename}: unsupported statement {tok!r}")
    return fd


def _parse_message(cur: _Cursor, package: str) -> descriptor_pb2.DescriptorProto:
    msg = descriptor_pb2.DescriptorProto(name=cur.take())
    cur.take("{")
    while cur.peek() != "}":
        label = cur.take()
        f = msg.field.add()
        if label == "map":
            cur.take("<")
            key = cur.take()
            cur.take(",")
            value = cur.take()
            cur.take(">")
            f.name = cur.take()
            entry = msg.nested_type.add(name=_entry_name(f.name))
            entry.options.map_entry = True
            for number, fname, tname in ((1, "key", key), (2, "value", value)):
                ef = entry.field.add(name=fname, number=number, label=LABELS["optional"], json_name=fname)
                ef.type, type_name = _type_ref(tname, package)
                if type_name:
                    ef.type_name = type_name
            f.label = LABELS["repeated"]
            f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
            f.type_name = f".{package}.{msg.name}.{entry.name}"
        elif label in LABELS:
            f.label = LABELS[label]
            f.type, type_name = _type_ref(cur.take(), package)
            if type_name:
                f.type_name = type_name
            f.name = cur.take()
        else:
            raise ParseError(f"message {msg.name}: unsupported field label {label!r}")
        cur.take("=")
        f.number = int(cur.take())
        f.json_name = f.name
        cur.take(";")
    cur.take("}")
    return msg


# -- Go struct tags ------------------------------------------------------------------------

_TAG = re.compile(r'(\w+):"((?:[^"\\]|\\.)*)"')


@dataclass
class GoField:
    number: int
    json: str
    flags: str  # o=omitempty, i=inline, x=json:"-"; then one kind: p pointer, b []byte, s slice, m map, v value


@dataclass
class GoStruct:
    fields: list[GoField] = field(default_factory=list)
    typemeta: bool = False  # embeds TypeMeta: `apiVersion`/`kind` are JSON keys with no proto field


def _go_kind(go_type: str, named: dict[str, str]) -> str:
    if go_type.startswith("*"):
        return "p"
    seen = 0
    while seen < 5:
        if go_type == "[]byte":
            return "b"
        if go_type.startswith("[]"):
            return "s"
        if go_type.startswith("map["):
            return "m"
        base = go_type.rsplit(".", 1)[-1]
        if base not in named:
            return "v"
        go_type = named[base]
        seen += 1
    return "v"


def parse_go(sources: list[str]) -> tuple[dict[str, GoStruct], dict[str, str]]:
    """Struct fields with protobuf tags, and named slice/map types, from one Go package."""
    structs: dict[str, GoStruct] = {}
    named: dict[str, str] = {}
    raw_fields: dict[str, list[tuple[str, str, str]]] = {}
    for src in sources:
        lines = src.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"^type (\w+) (\[\]\S+|map\[\S+)\s*$", line)
            if m:
                named[m.group(1)] = m.group(2)
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if not m:
                i += 1
                continue
            name = m.group(1)
            body: list[tuple[str, str, str]] = []
            depth = 1
            i += 1
            while i < len(lines) and depth > 0:
                text = lines[i]
                if text.lstrip().startswith("//"):
                    i += 1
                    continue
                if "`" not in text:
                    text = text.split("//", 1)[0]
                if depth == 1 and "`" in text:
                    head, _, rest = text.partition("`")
                    tag = rest.rsplit("`", 1)[0]
                    parts = head.split()
                    if len(parts) == 1:
                        body.append(("", parts[0], tag))
                    elif len(parts) == 2:
                        body.append((parts[0], parts[1], tag))
                depth += text.count("{") - text.count("}")
                i += 1
            raw_fields[name] = body
    for name, body in raw_fields.items():
        st = GoStruct()
        for fname, go_type, tag in body:
            tags = dict(_TAG.findall(tag))
            pb = tags.get("protobuf")
            js = tags.get("json")
            if pb is None or pb == "-":
                if go_type.endswith("TypeMeta") and fname == "" and js is not None and js.startswith(","):
                    st.typemeta = True
                continue
            number = int(pb.split(",")[1])
            flags = ""
            json_name = ""
            if js is None:
                flags += "x"
            else:
                opts = js.split(",")
                json_name = opts[0]
                if json_name == "-":
                    flags += "x"
                elif json_name == "":
                    flags += "i"
                if "omitempty" in opts[1:]:
                    flags += "o"
            flags += _go_kind(go_type, named)
            st.fields.append(GoField(number, json_name, flags))
        structs[name] = st
    return structs, named


# -- driver --------------------------------------------------------------------------------


def _git_show(git_dir: str, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _git_ls(git_dir: str, ref: str, path: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "--name-only", ref, f"{path}/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [p for p in out.split() if p.endswith(".go") and not p.endswith("_test.go") and "generated" not in p]


def _locate(import_path: str) -> tuple[str, str]:
    """`k8s.io/api/core/v1/generated.proto` -> ("api", "core/v1")."""
    parts = import_path.split("/")
    if parts[0] != "k8s.io" or parts[-1] != "generated.proto":
        raise ParseError(f"unexpected import {import_path}")
    return parts[1], "/".join(parts[2:-1])


def build(git_dirs: dict[str, str], ref: str) -> tuple[descriptor_pb2.FileDescriptorSet, dict[str, object]]:
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    go_info: dict[str, object] = {}
    slices: list[str] = []
    todo = [f"k8s.io/{repo}/{pkg}/generated.proto" for repo, pkg in ROOTS]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        repo, pkg = _locate(path)
        fd = parse_proto(_git_show(git_dirs[repo], ref, f"{pkg}/generated.proto"), path)
        files[path] = fd
        todo.extend(fd.dependency)
        structs, named = parse_go([_git_show(git_dirs[repo], ref, p) for p in _git_ls(git_dirs[repo], ref, pkg)])
        for msg in fd.message_type:
            full = f"{fd.package}.{msg.name}"
            st = structs.get(msg.name)
            if msg.name in named and [f.name for f in msg.field] == ["items"]:
                slices.append(full)
            if st is None:
                continue
            numbers = {f.number for f in msg.field}
            go_info[full] = {
                "tm": st.typemeta,
                "f": {str(g.number): [g.json, g.flags] for g in st.fields if g.number in numbers},
            }
    # dependencies first, as a descriptor pool wants them
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for dep in files[name].dependency:
            visit(dep)
        ordered.append(files[name])

    for name in sorted(files):
        visit(name)
    fds = descriptor_pb2.FileDescriptorSet(file=ordered)
    return fds, {"ref": ref, "slices": sorted(slices), "messages": go_info}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api-git", required=True, help="git dir of kubernetes/api")
    ap.add_argument("--apimachinery-git", required=True, help="git dir of kubernetes/apimachinery")
    ap.add_argument("--apiextensions-git", required=True, help="git dir of kubernetes/apiextensions-apiserver (CRDs)")
    ap.add_argument("--aggregator-git", required=True, help="git dir of kubernetes/kube-aggregator (APIServices)")
    ap.add_argument("--ref", default="v0.33.9")
    ap.add_argument("--out", default=str(HERE))
    args = ap.parse_args()
    git_dirs = {
        "api": args.api_git,
        "apimachinery": args.apimachinery_git,
        "apiextensions-apiserver": args.apiextensions_git,
        "kube-aggregator": args.aggregator_git,
    }
    fds, go_info = build(git_dirs, args.ref)
    out = Path(args.out)
    (out / "k8s.desc").write_bytes(fds.SerializeToString(deterministic=True))
    (out / "k8s_go.json").write_text(json.dumps(go_info, sort_keys=True, separators=(",", ":")) + "\n")
    missing = [
        f"{fd.package}.{m.name}"
        for fd in fds.file
        for m in fd.message_type
        if f"{fd.package}.{m.name}" not in go_info["messages"]  # type: ignore[operator]
    ]
    print(f"{len(fds.file)} files, {sum(len(f.message_type) for f in fds.file)} messages; no Go struct: {missing}")


if __name__ == "__main__":
    main()
