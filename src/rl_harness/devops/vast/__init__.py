"""vast.ai tooling: rent cheap GPU boxes that run one recipe each and destroy themselves.

The command is `rl-harness vast ...` (its parser and printing: `rl_harness/cli/vast.py`).
See README.md in this folder.
"""
