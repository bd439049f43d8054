"""`python -m components.dns`: the same as `raftkube dns`."""

import sys

from components.dns.main import main

sys.exit(main())
