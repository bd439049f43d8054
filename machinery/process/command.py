"""What every `raftkube` command shares, whichever layer defines it (the store's, the
apiserver's, a component's): the error for bad usage, and where a local cluster lives when
no `--data-dir` says otherwise.

`raftkube`'s entry point (components.cli) turns `UsageError` into its message and exit
status 2; a command raises it for a flag it cannot use, naming the flag.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_DATA_DIR = Path(".raftkube")
"""A local cluster's data dir, relative to the working directory, unless told otherwise."""


class UsageError(Exception):
    """Bad usage or a refused request: printed as `raftkube: <message>`, exit status 2."""
