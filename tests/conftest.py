"""Shared pytest fixtures."""

from __future__ import annotations

import os

# Keep Ray quiet and local in tests; never let a test reach a user's cluster.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.pop("RAY_ADDRESS", None)
