"""vast.ai tooling: rent cheap GPU boxes that run one recipe each and destroy themselves.

Entry point: `rl_harness.devops.vast.cli.main` (`rl-harness vast ...`,
`python -m rl_harness.devops.vast`). See README.md in this folder.
"""
