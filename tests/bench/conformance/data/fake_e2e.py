"""A stand-in for e2e.test (hand-written, for the runner's tests): records its command line,
prints ginkgo-like verbose output, makes an e2e namespace through the fake kubectl's state,
writes a junit_01.xml into --report-dir.  FAKE_E2E_MODE=hang: after one spec it starts a
child and both ignore SIGINT and sleep (the runner must kill them by process group);
FAKE_E2E_MODE=interruptible: the same, but both end on SIGINT, as ginkgo does."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_E2E_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
report_dir = Path(next(a.split("=", 1)[1] for a in args if a.startswith("--report-dir=")))
state = Path(os.environ["FAKE_KUBECTL_STATE"])
state.write_text(state.read_text() + " e2e-watch-4711")
print("Running Suite: Kubernetes e2e suite - fake\nWill run 2 of 6735 specs\nSSSSSSSS", flush=True)
print(
    "------------------------------\n[sig-api-machinery] Discovery should validate PreferredVersion [Conformance]",
    flush=True,
)
print("• [0.731 seconds]", flush=True)
if os.environ.get("FAKE_E2E_MODE") in ("hang", "interruptible"):
    deaf = os.environ["FAKE_E2E_MODE"] == "hang"
    sigint = signal.SIG_IGN if deaf else signal.SIG_DFL
    signal.signal(signal.SIGINT, sigint)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import signal, time; signal.signal(signal.SIGINT, signal.{sigint.name}); time.sleep(600)",
        ]
    )
    Path(os.environ["FAKE_E2E_PIDS"]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(600)
report_dir.mkdir(parents=True, exist_ok=True)
shutil.copy(os.environ["FAKE_E2E_JUNIT"], report_dir / "junit_01.xml")
print("------------------------------\n[sig-auth] ServiceAccounts should allow opting out [Conformance]", flush=True)
print("• [FAILED] [3.500 seconds]", flush=True)
sys.exit(1)
