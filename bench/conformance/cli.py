"""What the CLI calls once a `conformance` command is parsed (components.cli.conformance
declares the flags, so `--help` costs no import of this package)."""

from __future__ import annotations

import argparse

from bench.conformance import junit, options, report, run


def run_command(args: argparse.Namespace) -> int:
    opts = options.from_args(args)
    binaries = options.find_binaries(opts.parallel, args.kubectl)
    return run.run(opts, binaries)


def report_command(args: argparse.Namespace) -> int:
    """Rebuild conformance.json and conformance.md from existing JUnit files (a run that was
    cut, or one made elsewhere)."""
    found = junit.read(args.paths)
    summary = report.summarize(found, {"rebuilt_from": [str(p) for p in args.paths]})
    written = report.write(args.report_into or args.report, summary)
    print(report.markdown(summary), end="")
    print(f"conformance: wrote {written.json} and {written.markdown} from {len(found.files)} JUnit file(s)")
    return 0
