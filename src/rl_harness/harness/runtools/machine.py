"""Machine facts that change float results: which of them differ between two runs, or between
a run and this machine, said in one line.

Two runs with the same code, seed, options and thread count can still differ at float
rounding when the machine differs (another CPU's kernels, another kernel build's or glibc's
math, another torch or NumPy build): the flagship's six committed runs, retrained on another
host at their own commit, differed from iteration 1 (mean return 7.589254711 vs 7.589253704)
and then diverged. `diff`, `reproduce` and `reopen_run` name these fields so that nobody has
to hunt for the cause. A field an older manifest does not record is not compared.
"""

from __future__ import annotations

import contextlib
import importlib
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rl_harness.harness.configrecord import nested_lookup
from rl_harness.harness.hardware import cpu_model, numerics_facts
from rl_harness.harness.provenance import package_versions

# Dotted manifest keys; a dict under one (hardware.numerics.env) is compared key by key.
MACHINE_FIELDS = (
    "hardware.machine",
    "hardware.cpu_model",
    "hardware.os",  # kernel build and glibc (libm) version
    "hardware.numerics.cpu_flags",
    "hardware.numerics.torch_cpu_capability",
    "hardware.numerics.torch_build",
    "hardware.numerics.torch_blas",
    "hardware.numerics.numpy_blas",
    "hardware.numerics.numpy_simd",
    "hardware.numerics.env",
    "versions.python",
    "versions.torch",
    "versions.numpy",
)

CONSEQUENCE = "results are expected to differ at float rounding and may then diverge (not an error)"


@dataclass(frozen=True)
class MachineDifference:
    key: str  # a dotted manifest key
    a: Any
    b: Any


def machine_facts(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The MACHINE_FIELDS a manifest records; absent or None ones are left out (not known).
    A dict's entries are kept as they are, None too (an unset variable is a known value)."""
    facts: dict[str, Any] = {}
    for key in MACHINE_FIELDS:
        found, value = nested_lookup(manifest, key)
        if isinstance(value, Mapping):
            facts.update({f"{key}.{name}": item for name, item in value.items()})
        elif found and value is not None:
            facts[key] = value
    return facts


def this_machine() -> dict[str, Any]:
    """MACHINE_FIELDS as a run here would record them at its end (torch and NumPy imported,
    as a run imports them)."""
    for name in ("numpy", "torch"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    return machine_facts(
        {
            "hardware": {
                "machine": platform.machine(),
                "cpu_model": cpu_model(),
                "os": platform.platform(),
                "numerics": numerics_facts(),
            },
            "versions": package_versions(),
        }
    )


def machine_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[MachineDifference]:
    """The fields both sides know (`machine_facts`) whose values differ, in MACHINE_FIELDS
    order."""
    return [MachineDifference(key, a[key], b[key]) for key in a if key in b and a[key] != b[key]]


def _values(difference: MachineDifference, a_label: str, b_label: str) -> str:
    if isinstance(difference.a, list) and isinstance(difference.b, list):
        only_a = [item for item in difference.a if item not in difference.b]
        only_b = [item for item in difference.b if item not in difference.a]
        parts = [
            f"only {label} has {' '.join(map(str, items))}"
            for label, items in ((a_label, only_a), (b_label, only_b))
            if items
        ]
        return ", ".join(parts) or f"{a_label} and {b_label} list them in another order"
    return f"{a_label} {difference.a}, {b_label} {difference.b}"


def machine_note(
    differences: list[MachineDifference], a_label: str = "a", b_label: str = "b"
) -> str | None:
    """One line naming each differing field with both values and what it means; None when
    no known field differs."""
    if not differences:
        return None
    named = "; ".join(f"{d.key}: {_values(d, a_label, b_label)}" for d in differences)
    return f"the machine differs ({named}): {CONSEQUENCE}"
