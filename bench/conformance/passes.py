"""The passes of a conformance run and the command line each runs.

With --parallel 1 one pass runs e2e.test itself.  With N > 1, as the conformance image's
runner does, the ginkgo CLI runs N e2e.test processes over the specs that are not
`[Serial]`, then a second, single-process pass runs the `[Serial]` ones (they assume
nothing else runs).  Each pass writes its JUnit into its own folder: every e2e.test run
names its report `junit_01.xml`.

The split is ginkgo's label filter (`!Serial`, then `Serial`): e2e gives every `[Serial]`
spec the label `Serial` (v1.33: the same 897 specs either way), and a label filter leaves
the user's focus and skip untouched, where narrowing a focus regex to `[Serial]` cannot be
done in RE2 in general.  Each pass gets one focus and at most one skip expression: ginkgo
joins several with commas in its report's properties, where junit.py reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.conformance.options import Binaries, Options

SERIAL_LABEL = "Serial"


@dataclass(frozen=True)
class Pass:
    name: str
    """`all` (a single-process run), `parallel` or `serial`."""
    argv: tuple[str, ...]
    """The command line but ginkgo's --timeout, which is known only when the pass starts."""
    timeout_flag: str
    timeout_at: int
    """Where in `argv` the timeout flag goes (before the binary for the ginkgo CLI)."""
    report_dir: Path
    focus: str
    skips: tuple[str, ...]
    label_filter: str

    def command(self, timeout_s: float) -> list[str]:
        """The command line, with ginkgo's own budget: it then stops cleanly and still
        writes its report (run.py bounds the whole run harder)."""
        flag = f"{self.timeout_flag}={go_seconds(timeout_s)}"
        return [*self.argv[: self.timeout_at], flag, *self.argv[self.timeout_at :]]


def go_seconds(seconds: float) -> str:
    """A Go duration for ginkgo's --timeout (whole seconds, at least one)."""
    return f"{max(1, int(seconds))}s"


def e2e_flags(opts: Options, binaries: Binaries, kubeconfig: Path, report_dir: Path) -> list[str]:
    """The suite's own flags (test/e2e/framework/test_context.go), the same in every pass."""
    return [
        f"--kubeconfig={kubeconfig}",
        "--provider=skeleton",
        f"--report-dir={report_dir}",
        f"--kube-api-content-type={opts.content_type}",
        f"--kubectl-path={binaries.kubectl}",
        "--disable-log-dump",
    ]


def single(
    name: str, opts: Options, binaries: Binaries, kubeconfig: Path, report_dir: Path, skips: list[str], labels: str
) -> Pass:
    """e2e.test run directly: ginkgo's flags carry the `ginkgo.` prefix."""
    argv = [str(binaries.e2e), *e2e_flags(opts, binaries, kubeconfig, report_dir), f"--ginkgo.focus={opts.focus}"]
    argv += [f"--ginkgo.skip={s}" for s in skips]
    argv += [f"--ginkgo.label-filter={labels}"] if labels else []
    argv += ["--ginkgo.v", "--ginkgo.no-color"]
    return Pass(name, tuple(argv), "--ginkgo.timeout", len(argv), report_dir, opts.focus, tuple(skips), labels)


def parallel(opts: Options, binaries: Binaries, kubeconfig: Path, report_dir: Path, skips: list[str]) -> Pass:
    """The ginkgo CLI over the precompiled e2e.test: its flags, then the suite's after `--`."""
    assert binaries.ginkgo is not None
    argv = [str(binaries.ginkgo), f"--nodes={opts.parallel}", f"--focus={opts.focus}"]
    argv += [f"--skip={s}" for s in skips]
    argv += [f"--label-filter=!{SERIAL_LABEL}", "-v", "--no-color"]
    at = len(argv)
    argv += [str(binaries.e2e), "--", *e2e_flags(opts, binaries, kubeconfig, report_dir)]
    return Pass("parallel", tuple(argv), "--timeout", at, report_dir, opts.focus, tuple(skips), f"!{SERIAL_LABEL}")


def plan(opts: Options, binaries: Binaries, kubeconfig: Path, junit_root: Path) -> list[Pass]:
    """The passes to run, in order, each reporting into its folder under `junit_root`."""
    skips = [opts.skip] if opts.skip else []
    if opts.parallel == 1:
        return [single("all", opts, binaries, kubeconfig, junit_root / "all", skips, "")]
    return [
        parallel(opts, binaries, kubeconfig, junit_root / "parallel", skips),
        single("serial", opts, binaries, kubeconfig, junit_root / "serial", skips, SERIAL_LABEL),
    ]
