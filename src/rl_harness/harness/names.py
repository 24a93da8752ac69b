"""Names of the run records added with config.json, checkpoints.jsonl and Ray's kept logs.

Kept in one module so that a single owner of the run-folder layout can take them over.
"""

from __future__ import annotations

CONFIG_NAME = "config.json"  # results/<run-id>/: the resolved AlgorithmConfig, redacted
CHECKPOINT_LOG_NAME = "checkpoints.jsonl"  # results/<run-id>/: one row per saved checkpoint
RAY_LOGS_DIR = "ray_logs"  # artifacts/<run-id>/: Ray's session logs and its driver log lines
RAY_DRIVER_LOG = "driver.log"  # in RAY_LOGS_DIR: Ray's log records from the driver process
TUNE_INITIAL_CHECKPOINT = "initial_checkpoint"  # in a Tune trial folder: step 0
