#!/bin/sh
# A stand-in for `go` (tests/bench/peers/test_peers_build.py): it records each call's arguments
# in $FAKE_GO_LOG and answers as go would, enough for `raftkube peers build` to run offline.
# What it "builds" is a script that prints the build's arguments and the module's go.mod, so
# the version a real build stamps (ldflags, module versions) is what the binary answers.
echo "$*" >> "$FAKE_GO_LOG"
case "$1" in
env)
    printf '{"GOVERSION": "go1.99-fake", "GOPROXY": "%s"}\n' "${FAKE_GOPROXY-https://proxy.golang.org,direct}"
    exit 0 ;;
mod)
    case "$4" in
    k8s.io/kubernetes@*)
        printf '{"Path": "k8s.io/kubernetes", "GoMod": "%s", "Dir": "%s"}\n' "$FAKE_KUBE_GOMOD" "$FAKE_KUBE_DIR"
        exit 0 ;;
    esac
    shift 3
    status=0
    for a in "$@"; do
        if [ "${a%@*}" = "${FAKE_GO_UNSERVED-none}" ]; then
            printf '{"Path": "%s", "Version": "%s", "Error": "403 Forbidden"}\n' "${a%@*}" "${a#*@}"
            status=1
        else
            printf '{"Path": "%s", "Version": "%s"}\n' "${a%@*}" "${a#*@}"
        fi
    done
    exit $status ;;
list)
    printf '{"Path": "%s", "Versions": ["v0.32.3", "v0.33.3", "v0.33.5"]}\n' "$5"
    exit 0 ;;
version)  # `go version -m -json FILE`: the build info, from the "# dep" lines of what it "built"
    printf '{"GoVersion": "go1.99-fake", "Path": "fake", "Deps": ['
    sep=""
    sed -n 's/^# dep \([^ ]*\) \([^ ]*\)$/\1 \2/p' "$4" | while read -r path version; do
        printf '%s{"Path": "%s", "Version": "%s"}' "$sep" "$path" "${FAKE_GO_BUILDINFO_VERSION-$version}"
        sep=", "
    done
    printf ']}\n'
    exit 0 ;;
esac
if [ "$1" = "${FAKE_GO_FAIL-none}" ]; then
    i=0
    while [ $i -lt 60 ]; do echo "fake compile noise line $i"; i=$((i + 1)); done
    echo "${FAKE_GO_FAIL_LINE-fake.go:1:1: undefined: everything}"
    exit 1
fi
case "$1" in
build|test|install)
    out="$GOBIN/ginkgo"
    prev=""
    for a in "$@"; do
        if [ "$prev" = "-o" ]; then out="$a"; fi
        prev="$a"
    done
    case "$*" in
    */test/images/nonewprivs)  # the image's program: no version, it prints its effective uid
        { echo '#!/bin/sh'; echo 'echo "Effective uid: $(id -u)"'; } > "$out" ;;
    *" k8s.io/sample-apiserver")  # no version either: its --help names what it is
        { echo '#!/bin/sh'; echo 'echo "Launch a wardle API server"'; } > "$out" ;;
    *" go.etcd.io/etcd/v3/tools/benchmark")  # etcd's load tool: its --help, and its build info
        { echo '#!/bin/sh'; echo 'echo "benchmark is a low-level benchmark tool for etcd3."'
          sed -n 's/^require \([^ ]*\) \([^ ]*\)$/# dep \1 \2/p' go.mod; } > "$out" ;;
    *)
        { echo '#!/bin/sh'; echo "cat <<'END'"; echo "$*"; cat go.mod 2>/dev/null; echo 'END'; } > "$out" ;;
    esac
    chmod +x "$out" ;;
esac
exit 0
