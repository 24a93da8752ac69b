"""rl-harness: reproducible RL experiment composition on Ray RLlib and Tune.

The public names below load lazily, so `import rl_harness` (and the CLI's --help)
stays fast; RLlib is imported only when a runner is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RunContext": "rl_harness.harness.context",
    "make_context": "rl_harness.harness.context",
    "HardwarePlan": "rl_harness.harness.hardware",
    "apply_hardware": "rl_harness.harness.hardware",
    "run_algorithm": "rl_harness.harness.runners",
    "run_tune": "rl_harness.harness.runners",
    "RunResult": "rl_harness.harness.runners",
    "TuneRunResult": "rl_harness.harness.runners",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl_harness' has no attribute {name!r}")
