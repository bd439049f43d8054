"""`python -m components.scheduler --kubeconfig PATH ...` (what `raftkube scheduler` runs)."""

import sys

from components.scheduler.main import main

sys.exit(main())
