"""`raftkube conformance`: the passes against a fresh cluster (or --kubeconfig's), bounded in
time, then the namespaces they left and the cluster cleaned up, then the reports.

Time: --timeout bounds the whole run, cluster start-up included.  Each pass gets what is
left as ginkgo's own --timeout less a grace, so ginkgo normally ends it cleanly (interrupted
specs recorded, JUnit written); at the hard deadline the pass's process group (ginkgo and
its e2e.test processes, started in a session of their own) gets SIGINT, which ginkgo also
handles by reporting, then SIGKILL.  A run cut short still writes its summary from what the
JUnit files hold; `raftkube conformance report` rebuilds it later from them.

Output: ginkgo's full output goes to `<pass>/e2e.log` beside that pass's JUnit (what the
CNCF asks for with junit_01.xml); the terminal shows a line per finished spec.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from bench.conformance import cluster, junit, namespaces, passes, report
from bench.conformance.options import Binaries, Options
from bench.conformance.progress import Progress
from machinery.process import peers
from machinery.process.command import UsageError

JUNIT_DIR = "conformance-junit"
CLUSTER_LOGS = "cluster-logs"
INTERRUPT_GRACE_S = 60.0
"""After SIGINT at the hard deadline, how long ginkgo gets to write its reports."""
OUTPUT_DRAIN_S = 30.0
"""After the kill, how long the output is read on (what the processes wrote before dying)."""
MIN_PASS_S = 30.0
"""A pass with less time than this left is not started (it could not get past the suite's setup)."""


def ginkgo_budget(left_s: float) -> float:
    """ginkgo's --timeout for a pass with `left_s` until the hard deadline: a tenth less, at
    most 5 minutes less, so that ginkgo's own ending comes first."""
    return max(1.0, left_s - min(300.0, left_s / 10))


@dataclass
class PassResult:
    name: str
    code: int | None
    """Its exit code; None: killed at the deadline."""
    seconds: float


def say(line: str) -> None:
    print(line, flush=True)


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    for raw in iter(stream.readline, b""):
        lines.put(raw)
    lines.put(None)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float | None = None) -> None:
    """SIGINT the pass's process group (ginkgo reports on it), then SIGKILL after `grace_s`
    (INTERRUPT_GRACE_S by default)."""
    _signal_group(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=INTERRUPT_GRACE_S if grace_s is None else grace_s)
    _signal_group(proc.pid, signal.SIGKILL)  # e2e.test processes of a parallel run included
    proc.wait()


def run_pass(
    p: passes.Pass, deadline: float, progress: Progress, clock: Callable[[], float] = time.monotonic
) -> PassResult:
    """Run one pass until it ends or the deadline; its output into `<report_dir>/e2e.log`."""
    p.report_dir.mkdir(parents=True, exist_ok=True)
    argv = p.command(ginkgo_budget(deadline - clock()))
    say(f"conformance: pass {p.name}: {' '.join(argv)}")
    started = clock()
    lines: queue.Queue[bytes | None] = queue.Queue()
    with open(p.report_dir / "e2e.log", "wb") as log:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
        reader.start()
        killed = False
        try:
            while True:
                try:
                    raw = lines.get(timeout=max(0.05, min(1.0, deadline - clock())))
                except queue.Empty:
                    raw = b""
                if raw is None:
                    break
                if raw:
                    log.write(raw)
                    for line in progress.feed(raw.decode("utf-8", "replace")):
                        say(line)
                if clock() >= deadline and not killed:
                    say(f"conformance: --timeout reached: interrupting pass {p.name} (pid {proc.pid} and its group)")
                    killed = True
                    stop_group(proc)
                if killed and clock() > deadline + INTERRUPT_GRACE_S + OUTPUT_DRAIN_S:
                    break  # a process that left the group still holds the output open: stop reading it
        except BaseException:
            stop_group(proc, grace_s=10.0)  # Ctrl-C: leave nothing running
            raise
        finally:
            for line in progress.finish():
                say(line)
        proc.wait()
        reader.join(timeout=5)
        if not reader.is_alive():
            proc.stdout.close()
    return PassResult(p.name, None if killed else proc.returncode, clock() - started)


@contextlib.contextmanager
def target(opts: Options, logs_into: Path) -> Iterator[Path]:
    """The kubeconfig to test: --kubeconfig's, or a fresh cluster's for the block."""
    if opts.kubeconfig is not None:
        yield opts.kubeconfig
        return
    with cluster.fresh_cluster(opts.config, logs_into, say, opts.pod_network) as kubeconfig:
        yield kubeconfig


def clean_namespaces(binaries: Binaries, kubeconfig: Path, before: set[str] | None) -> None:
    if before is None:
        return
    try:
        doomed = namespaces.left_by_run(before, namespaces.names(binaries.kubectl, kubeconfig))
        if doomed:
            say(f"conformance: deleting {len(doomed)} namespace(s) the run left: {', '.join(doomed[:20])}")
        namespaces.delete(binaries.kubectl, kubeconfig, doomed)
    except namespaces.NamespaceError as e:
        say(f"conformance: WARNING: could not clean the test namespaces up: {e}")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """SIGTERM and SIGINT stop the run as Ctrl-C does: the pass's process group is stopped, the
    namespaces cleaned and the fresh cluster taken down, and no later pass starts.  SIGINT is
    caught even when it was inherited ignored (a run started in the background by a shell, which
    otherwise could only be killed, leaving the cluster behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread: a caller elsewhere keeps its own
        return
    before = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def run(opts: Options, binaries: Binaries) -> int:
    """The whole run; 0 when every selected spec passed, 1 otherwise (or when cut short)."""
    with stoppable():
        return _run(opts, binaries)


def _run(opts: Options, binaries: Binaries) -> int:
    deadline = time.monotonic() + opts.timeout_s
    junit_root = opts.report_dir / JUNIT_DIR
    shutil.rmtree(junit_root, ignore_errors=True)  # an old run's reports would merge into this one's
    progress = Progress()
    results: list[PassResult] = []
    cut = ""
    try:
        with target(opts, opts.report_dir / CLUSTER_LOGS) as kubeconfig:
            before: set[str] | None = None
            try:
                before = namespaces.names(binaries.kubectl, kubeconfig)
            except namespaces.NamespaceError as e:
                say(f"conformance: WARNING: cannot list namespaces, so none will be cleaned up: {e}")
            try:
                for p in passes.plan(opts, binaries, kubeconfig, junit_root):
                    if deadline - time.monotonic() < MIN_PASS_S:
                        cut = f"--timeout left no time for the {p.name} pass"
                        say(f"conformance: {cut}")
                        break
                    result = run_pass(p, deadline, progress)
                    results.append(result)
                    say(f"conformance: pass {p.name} ended ({_ended(result)}) after {result.seconds:.0f} s")
                    if result.code is None:
                        cut = f"--timeout reached in the {p.name} pass"
                        break
            finally:
                clean_namespaces(binaries, kubeconfig, before)
    except cluster.ClusterError as e:
        print(f"raftkube: {e}", file=sys.stderr)
        return 1
    say(f"conformance: {progress.counts.line()}")
    try:
        found = junit.read([junit_root])
    except UsageError as e:
        print(f"raftkube: no report to summarize: {e}", file=sys.stderr)
        return 1
    summary = report.summarize(found, _run_facts(opts, results, cut))
    written = report.write(opts.report_dir, summary)
    print(report.markdown(summary), end="")
    say(f"conformance: wrote {written.json} and {written.markdown} (JUnit and e2e.log in {junit_root})")
    failed = summary["total"]["failed"] or summary["suite_failures"]
    return 0 if results and all(r.code == 0 for r in results) and not (failed or cut) else 1


def _ended(result: PassResult) -> str:
    return "killed at the deadline" if result.code is None else f"exit {result.code}"


def _run_facts(opts: Options, results: list[PassResult], cut: str) -> dict[str, Any]:
    return {
        "e2e_version": peers.KUBERNETES_VERSION,
        "parallel": opts.parallel,
        "cluster": str(opts.kubeconfig) if opts.kubeconfig else "fresh raftkube up",
        "content_type": opts.content_type,
        "timeout_s": opts.timeout_s,
        "cut": cut,
        "passes": [{"name": r.name, "exit": r.code, "seconds": round(r.seconds, 1)} for r in results],
    }
