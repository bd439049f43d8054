"""`python -m components.cli ...`: `raftkube ...` without the installed console script (the
launchers start every local process so, with this checkout first on the import path)."""

import sys

from components.cli.main import main

sys.exit(main())
