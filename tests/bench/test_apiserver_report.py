"""The benchmark's text report (bench.apiserver.report) from a recorded run."""

from __future__ import annotations

import json

from bench.apiserver.report import render
from tests.support.paths import ROOT

RECORDED = ROOT / "bench" / "results" / "apiserver-vs-kube-amd.json"
"""A full run with three backends (raftkube, our apiserver on etcd, kube-apiserver)."""


def test_every_backend_name_stands_apart_from_its_first_figure() -> None:
    """ "kube-apiserver" (14 characters) ran into the next column when it was a fixed 10 wide
    ("kube-apiservercache" in the LIST table)."""
    doc = json.loads(RECORDED.read_text())
    lines = render(doc).splitlines()
    named = [x for x in lines if x.startswith(("raftkube ", "etcd ", "kube-apiserver"))]
    assert len(named) >= 5 * 3, named  # fan-out, throughput, LIST (two kinds), creates, memory
    for line in named:
        assert line.split()[0] in ("raftkube", "etcd", "kube-apiserver"), line
    lists = [x.split()[:2] for x in lines if x.split()[1:2] in (["cache"], ["consistent"])]
    assert ["kube-apiserver", "cache"] in lists and ["kube-apiserver", "consistent"] in lists, lists
