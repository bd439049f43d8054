"""JUnit parsing and the summary, from a hand-written junit_01.xml in ginkgo v2's format
(data/junit_01.xml says what it holds), and `raftkube conformance report` rebuilding
conformance.json and conformance.md from JUnit files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.conformance import junit, report
from components.cli.main import main

DATA = Path(__file__).parent / "data"
JUNIT = DATA / "junit_01.xml"


def test_each_spec_with_its_sig_result_duration_and_first_lines() -> None:
    found = junit.read([JUNIT])
    by_name = {c.name: c for c in found.cases}
    watch = by_name[
        "[sig-api-machinery] Watchers should be able to restart watching from the last resource version"
        " observed by the previous watch [Conformance]"
    ]
    assert (watch.sig, watch.result, watch.status, watch.seconds) == ("sig-api-machinery", "failed", "failed", 62.004)
    assert watch.message == (
        "[FAILED] Expected watch event ADDED for configmap e2e-watch-test-watch-closed, got none\n"
        "In [It] at: k8s.io/kubernetes/test/e2e/apimachinery/watch.go:262 @ 12/04/26 21:51:05.311"
    )
    optout = by_name["[sig-auth] ServiceAccounts should allow opting out of API token automount  [Conformance]"]
    assert optout.message == 'pod "pod-service-account-nomountsa" has volume kube-api-access: expected none'
    timed = by_name["[sig-node] Pods should be updated [NodeConformance] [Conformance]"]
    assert (timed.result, timed.status) == ("failed", "timedout")
    two = by_name["[sig-architecture] Conformance Tests should have at least two untainted nodes [Conformance]"]
    assert (two.result, two.message) == ("skipped", "Conformance requires at least two nodes")
    assert sorted(c.name for c in found.cases if c.result == "not-selected") == [
        "[sig-apps] Deployment should not disrupt a cloud load-balancer's connectivity during rollout",
        "[sig-storage] CSI Mock volume attach should not require VolumeAttach for drivers without attachment",
    ]
    assert [c.name for c in found.suite_nodes] == [
        "[SynchronizedBeforeSuite]",
        "[SynchronizedAfterSuite]",
        "Kubernetes e2e suite report",
    ]
    assert found.properties["FocusStrings"] == r"\[Conformance\]"


def test_summary_counts_per_sig_and_in_total() -> None:
    summary = report.summarize(junit.read([JUNIT]))
    assert summary["total"] == {"passed": 2, "failed": 3, "skipped": 1, "pass_pct": 33.3}
    assert summary["not_selected"] == 2
    assert summary["sigs"] == {
        "sig-api-machinery": {"passed": 2, "failed": 1, "skipped": 0, "pass_pct": 66.7},
        "sig-architecture": {"passed": 0, "failed": 0, "skipped": 1, "pass_pct": 0.0},
        "sig-auth": {"passed": 0, "failed": 1, "skipped": 0, "pass_pct": 0.0},
        "sig-node": {"passed": 0, "failed": 1, "skipped": 0, "pass_pct": 0.0},
    }
    assert len(summary["tests"]) == 6 and summary["suite_failures"] == []
    assert {t["result"] for t in summary["tests"]} == {"passed", "failed", "skipped"}


def test_markdown_has_a_row_per_sig_the_total_and_the_failures() -> None:
    text = report.markdown(report.summarize(junit.read([JUNIT])))
    assert "| sig-api-machinery | 2 | 1 | 0 | 66.7 |" in text
    assert "| sig-auth | 0 | 1 | 0 | 0.0 |" in text
    assert "| **total** | 2 | 3 | 1 | 33.3 |" in text
    assert (
        "- `[sig-node] Pods should be updated [NodeConformance] [Conformance]`: [TIMEDOUT] A suite timeout occurred"
        in text
    )


SERIAL_PASS = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2"><testsuite name="Kubernetes e2e suite" tests="2">
  <testcase name="[It] [sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup [Conformance]"
    status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  <testcase status="passed" time="12.5"
    name="[It] [sig-storage] CSI Mock volume attach should not require VolumeAttach for drivers without attachment"/>
</testsuite></testsuites>
"""
"""Hand-written: a second pass's report, where the first pass's specs are the ones left out."""


def test_passes_merge_each_spec_keeps_the_result_where_it_ran(tmp_path: Path) -> None:
    (tmp_path / "parallel").mkdir()
    shutil.copy(JUNIT, tmp_path / "parallel" / "junit_01.xml")
    (tmp_path / "serial").mkdir()
    (tmp_path / "serial" / "junit_01.xml").write_text(SERIAL_PASS)
    found = junit.read([tmp_path])
    assert len(found.files) == 2
    by_name = {c.name: c.result for c in found.cases}
    discovery = "[sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup [Conformance]"
    csi = "[sig-storage] CSI Mock volume attach should not require VolumeAttach for drivers without attachment"
    assert (by_name[discovery], by_name[csi]) == ("passed", "passed")
    assert len(found.cases) == 8  # one per spec, not one per report


def test_specs_sharing_their_text_are_all_counted(tmp_path: Path) -> None:
    same = '<testcase name="[It] [sig-apps] Job should run a job [Conformance]" status="{}" time="1"/>'
    (tmp_path / "junit_01.xml").write_text(
        f"<testsuites><testsuite>{same.format('passed')}{same.format('failed')}</testsuite></testsuites>"
    )
    found = junit.read([tmp_path])
    assert [(c.name, c.result) for c in found.cases] == [
        ("[sig-apps] Job should run a job [Conformance]", r) for r in ("passed", "failed")
    ]


CUT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite"><properties>
  <property name="SpecialSuiteFailureReason" value="Suite Timeout Elapsed"></property>
  <property name="FocusStrings" value="\\[sig-apps\\].*\\[Conformance\\]"></property>
  <property name="SkipStrings" value="Disruptive"></property>
  <property name="LabelFilter" value="!Serial"></property>
</properties>
  <testcase name="[It] [sig-apps] Job should run a job to completion [Conformance]" status="passed" time="9"/>
  <testcase name="[It] [sig-apps] Job should delete a job [Conformance]" status="skipped" time="0">
    <skipped message="skipped"></skipped></testcase>
  <testcase name="[It] [sig-apps] Daemon set [Serial] should rollback [Conformance]" status="skipped" time="0">
    <skipped message="skipped"></skipped></testcase>
  <testcase name="[It] [sig-node] Pods should be updated [Conformance]" status="skipped" time="0">
    <skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>
"""
"""Hand-written: a pass its suite timeout ended, where ginkgo reports the selected specs it
never ran exactly as those the focus left out."""


def test_selected_specs_a_suite_timeout_left_unrun_are_skipped_not_left_out(tmp_path: Path) -> None:
    (tmp_path / "junit_01.xml").write_text(CUT)
    found = {c.name: (c.result, c.message) for c in junit.read([tmp_path]).cases}
    assert found == {
        "[sig-apps] Job should run a job to completion [Conformance]": ("passed", ""),
        "[sig-apps] Job should delete a job [Conformance]": ("skipped", "not run: Suite Timeout Elapsed"),
        "[sig-apps] Daemon set [Serial] should rollback [Conformance]": ("not-selected", ""),  # the label filter
        "[sig-node] Pods should be updated [Conformance]": ("not-selected", ""),  # not the focus
    }
    summary = report.summarize(junit.read([tmp_path]))
    assert (summary["not_run"], summary["not_selected"]) == (1, 2)
    assert "1 selected specs never ran" in report.markdown(summary)


def test_report_command_rebuilds_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["conformance", "report", str(DATA), "--report", str(out)]) == 0
    doc = json.loads((out / "conformance.json").read_text())
    assert doc["total"]["failed"] == 3 and doc["sources"] == [str(JUNIT)]
    assert "| **total** | 2 | 3 | 1 | 33.3 |" in (out / "conformance.md").read_text()
    assert "| **total** |" in capsys.readouterr().out


def test_report_command_refuses_what_is_not_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "junit_01.xml"
    bad.write_text("<html><body>502</body></html>")
    assert main(["conformance", "report", str(bad), "--report", str(tmp_path)]) == 2
    assert f"{bad}: not a JUnit XML report" in capsys.readouterr().err
    assert main(["conformance", "report", str(tmp_path / "nowhere")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["conformance", "report", str(tmp_path / "empty"), "--report", str(tmp_path)]) == 2
    assert "no JUnit report" in capsys.readouterr().err
