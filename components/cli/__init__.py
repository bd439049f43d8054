"""The `raftkube` command line: its entry point (`main`), the commands that run a whole local
cluster (`cluster`: up, down, status; `parts`: logs, restart, stop, start one process;
`user`: a person's kubeconfig), how local processes are started and kept alive
(`launcher`, `supervisor`, `up_lock`, `up_view`), and the benchmark commands, loaded lazily
(`bench`).

This package is the one place above every layer: it wires the store's, the apiserver's and
the components' commands into one parser, so it may import all of them.  Nothing imports
it (the console script and `python -m components.cli` run it), and it imports no bench
module until a benchmark is run.
"""

from components.cli.main import main

__all__ = ["main"]
