"""`python -m rl_harness.devops.vast ...`."""

import sys

from .cli import main

sys.exit(main())
