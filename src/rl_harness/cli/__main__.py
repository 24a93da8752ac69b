"""`python -m rl_harness.cli ...`: the same as `rl-harness ...`."""

import sys

from rl_harness.cli import main

sys.exit(main())
