"""The command lines `raftkube conformance` builds for e2e.test and ginkgo (focus, skip, the
parallel pass and the serial one), and the usage errors it stops at before starting anything
(exit 2, naming the flag or the build command)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.conformance import options, passes
from components.cli.main import build_parser, main

BIN = options.Binaries(e2e=Path("/peers/e2e.test"), ginkgo=Path("/peers/ginkgo"), kubectl=Path("/bin/kubectl.1.33"))
KC = Path("/tmp/kc")
JUNIT = Path("/tmp/out/conformance-junit")


def opts(*argv: str) -> options.Options:
    return options.from_args(build_parser().parse_args(["conformance", *argv]))


def test_one_process_runs_e2e_test_itself_with_the_suite_flags() -> None:
    [only] = passes.plan(opts("--skip", "Slow"), BIN, KC, JUNIT)
    assert only.name == "all" and only.report_dir == JUNIT / "all"
    assert only.command(7200.0) == [
        "/peers/e2e.test",
        "--kubeconfig=/tmp/kc",
        "--provider=skeleton",
        f"--report-dir={JUNIT / 'all'}",
        "--kube-api-content-type=application/json",
        "--kubectl-path=/bin/kubectl.1.33",
        "--disable-log-dump",
        r"--ginkgo.focus=\[Conformance\]",
        "--ginkgo.skip=Slow",
        "--ginkgo.v",
        "--ginkgo.no-color",
        "--ginkgo.timeout=7200s",
    ]


def test_parallel_runs_ginkgo_without_serial_then_the_serial_specs_in_one_process() -> None:
    parallel, serial = passes.plan(
        opts("--parallel", "4", "--content-type", "application/vnd.kubernetes.protobuf"), BIN, KC, JUNIT
    )
    assert parallel.command(600.0) == [
        "/peers/ginkgo",
        "--nodes=4",
        r"--focus=\[Conformance\]",
        "--label-filter=!Serial",
        "-v",
        "--no-color",
        "--timeout=600s",
        "/peers/e2e.test",
        "--",
        "--kubeconfig=/tmp/kc",
        "--provider=skeleton",
        f"--report-dir={JUNIT / 'parallel'}",
        "--kube-api-content-type=application/vnd.kubernetes.protobuf",
        "--kubectl-path=/bin/kubectl.1.33",
        "--disable-log-dump",
    ]
    argv = serial.command(600.0)
    assert argv[0] == "/peers/e2e.test" and f"--report-dir={JUNIT / 'serial'}" in argv
    assert r"--ginkgo.focus=\[Conformance\]" in argv and "--ginkgo.label-filter=Serial" in argv
    assert not any(a.startswith("--ginkgo.skip=") for a in argv)


def test_the_users_focus_and_skip_apply_to_both_passes_unchanged() -> None:
    """Even a focus that names [Serial] itself, or is anchored: the split is by label."""
    focus = "^\\[sig-api-machinery\\] Namespaces \\[Serial\\] should apply changes"
    parallel, serial = passes.plan(opts("--parallel", "2", "--focus", focus, "--skip", "Disruptive"), BIN, KC, JUNIT)
    assert parallel.focus == serial.focus == focus
    assert parallel.skips == serial.skips == ("Disruptive",)
    assert (parallel.label_filter, serial.label_filter) == ("!Serial", "Serial")
    assert "--skip=Disruptive" in parallel.command(60.0) and "--ginkgo.skip=Disruptive" in serial.command(60.0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("2h", 7200.0), ("90m", 5400.0), ("1h30m", 5400.0), ("45s", 45.0), ("1.5h", 5400.0)]
)
def test_timeouts_are_go_durations(text: str, seconds: float) -> None:
    assert options.parse_duration("--timeout", text) == seconds


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--focus", "[Conformance"], "--focus '[Conformance'"),
        (["--skip", "(Slow"], "--skip '(Slow'"),
        (["--focus", "(?!Serial)Conformance"], "--focus"),
        (["--timeout", "2"], "--timeout '2'"),
        (["--timeout", "two hours"], "--timeout"),
        (["--timeout", "0s"], "--timeout '0s'"),
        (["--timeout", "1h-5m"], "--timeout"),
        (["--parallel", "0"], "--parallel 0"),
        (["--content-type", "application/yaml"], "--content-type"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no peer built: the flags are checked first all the same
    assert main(["conformance", *argv, "--report", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("raftkube: ") and named in err
    assert not (tmp_path / "out").exists()


def test_missing_e2e_test_exits_2_with_the_build_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["conformance", "--report", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "e2e.test" in err and "raftkube peers build --only e2e.test,ginkgo" in err
    assert "ginkgo" not in err.split(";")[0]  # one process needs no ginkgo CLI
    assert main(["conformance", "--parallel", "2", "--report", str(tmp_path / "out")]) == 2
    assert "/ginkgo" in capsys.readouterr().err


def test_missing_ginkgo_alone_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from machinery.process import peers

    for name in ("e2e.test", "agnhost", "nonewprivs", "busybox", "sample-apiserver", "etcd"):
        peers.peer_path(name).parent.mkdir(parents=True, exist_ok=True)
        peers.peer_path(name).write_text("#!/bin/sh\n")
    assert main(["conformance", "--parallel", "3", "--report", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "not built: " + str(peers.peer_path("ginkgo")) + ";" in err and "peers build --only e2e.test,ginkgo" in err


def test_the_image_peers_are_required(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without them conformance's pods would fail for the wrong reason (busybox would be
    Debian's, which drops `data-1` variables; the Aggregator spec's pod would not start): named,
    never a silent fallback."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from machinery.process import peers

    for name in ("e2e.test", "agnhost", "nonewprivs", "etcd"):
        peers.peer_path(name).parent.mkdir(parents=True, exist_ok=True)
        peers.peer_path(name).write_text("#!/bin/sh\n")
    assert main(["conformance", "--report", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(peers.peer_path("busybox")) in err and str(peers.peer_path("sample-apiserver")) in err
    assert "not built: " in err and ",busybox,sample-apiserver," in err


def test_the_fresh_cluster_puts_pods_in_network_namespaces_when_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert opts().pod_network == "netns"  # replicas listening on one port need IPs of their own
    assert opts("--pod-network", "host").pod_network == "host"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert opts().pod_network == "host"  # netns needs root


def test_an_unknown_pod_network_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        opts("--pod-network", "bridge")
    assert stopped.value.code == 2 and "--pod-network" in capsys.readouterr().err
