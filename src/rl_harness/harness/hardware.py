"""Hardware profiles: named resource plans applied to an AlgorithmConfig, plus host facts."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

PROFILE_NAMES = ("cpu-local", "single-gpu", "multi-gpu", "auto")


@dataclass(frozen=True)
class HardwarePlan:
    """RLlib resources for one run; how many envs each runner steps stays the recipe's."""

    profile: str
    requested: str
    num_env_runners: int
    num_learners: int
    num_gpus_per_learner: float
    num_cpus_per_env_runner: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gpu_count() -> int:
    """Visible NVIDIA GPUs, from nvidia-smi (no torch import; fast when absent)."""
    return len(gpu_info())


def gpu_info() -> list[dict[str, str]]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.strip().splitlines():
        name, memory, driver = (part.strip() for part in line.split(","))
        rows.append({"name": name, "memory": memory, "driver": driver})
    return rows


def _cpu_budget() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_profile(name: str) -> str:
    """The name, if it is a profile; ValueError naming the choices otherwise."""
    if name not in PROFILE_NAMES:
        raise ValueError(
            f"unknown hardware profile {name!r}; choose one of {', '.join(PROFILE_NAMES)}"
        )
    return name


def resolve_profile(name: str, *, gpus: int | None = None, cpus: int | None = None) -> HardwarePlan:
    """The plan for a profile name; `auto` picks by the GPUs this host has."""
    check_profile(name)
    cpus = _cpu_budget() if cpus is None else cpus
    if name == "auto":
        gpus = gpu_count() if gpus is None else gpus
        chosen = "cpu-local" if gpus == 0 else "single-gpu" if gpus == 1 else "multi-gpu"
        return replace(resolve_profile(chosen, gpus=gpus, cpus=cpus), requested="auto")
    if name == "cpu-local":
        # Sampling in the driver process: deterministic and the cheapest on a laptop.
        return HardwarePlan(
            name,
            name,
            num_env_runners=0,
            num_learners=0,
            num_gpus_per_learner=0,
        )
    # Leave one CPU for the driver and one for the learner; the rest sample.
    runners = max(1, cpus - 2)
    if name == "single-gpu":
        return HardwarePlan(
            name,
            name,
            num_env_runners=runners,
            num_learners=0,
            num_gpus_per_learner=1,
        )
    gpus = gpu_count() if gpus is None else gpus
    return HardwarePlan(
        name,
        name,
        num_env_runners=runners,
        num_learners=max(2, gpus),
        num_gpus_per_learner=1,
    )


def apply_hardware(config: AlgorithmConfig, plan: HardwarePlan) -> AlgorithmConfig:
    """A copy of `config` with the plan's resources; scientific settings are untouched."""
    config = config.copy(copy_frozen=False)
    config.env_runners(
        num_env_runners=plan.num_env_runners,
        num_cpus_per_env_runner=plan.num_cpus_per_env_runner,
    )
    config.learners(num_learners=plan.num_learners, num_gpus_per_learner=plan.num_gpus_per_learner)
    return config


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_settings() -> dict[str, Any]:
    """What decides the run's CPU thread count: the OpenMP/MKL variables and torch's intra-op
    threads (None while torch is not imported). Float results can depend on it (the order of
    a reduction), so the manifest records it at the start and again at the end."""
    torch = sys.modules.get("torch")
    return {
        **{name: os.environ.get(name) for name in THREAD_ENV},
        "torch_intra_op_threads": torch.get_num_threads() if torch is not None else None,
    }


def host_facts() -> dict[str, Any]:
    """What a manifest records about the machine."""
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_available": _cpu_budget(),
        "memory_bytes": _memory_bytes(),
        "gpus": gpu_info(),
        "threads": thread_settings(),
    }
