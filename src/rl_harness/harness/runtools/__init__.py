"""What `rl-harness runs | show | diff | reproduce` do: read, compare and re-run recorded runs.

`records.py` holds `RunRecord`, the one reader of a run folder; the commands' parsers and
output are `rl_harness/cli/runs.py`.
"""
