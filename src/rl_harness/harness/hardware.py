"""Hardware profiles: named resource plans applied to an AlgorithmConfig, plus host facts."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

PROFILE_NAMES = ("cpu-local", "single-gpu", "multi-gpu", "auto")


TORCH_THREADS_ENV = "RL_HARNESS_TORCH_THREADS"


@dataclass(frozen=True)
class HardwarePlan:
    """RLlib resources for one run; how many envs each runner steps stays the recipe's.

    `torch_threads`: torch's intra-op threads in the driver (where a cpu-local run samples
    and learns): one per core the plan leaves it (the cores given to the run, less one per
    remote env runner and learner; Ray already sets OMP_NUM_THREADS in those workers to the
    CPUs they hold). `torch_threads_from` says who chose it: "plan", "option" (--torch-threads),
    or the environment variable RL_HARNESS_TORCH_THREADS (a sweep's children) or
    OMP_NUM_THREADS (the user's), in that order."""

    profile: str
    requested: str
    num_env_runners: int
    num_learners: int
    num_gpus_per_learner: float
    num_cpus_per_env_runner: int = 1
    torch_threads: int = 1
    torch_threads_from: str = "plan"

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


def check_torch_threads(value: object, what: str = "torch threads") -> int:
    """A positive int (ValueError naming `what` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return value


def _env_torch_threads() -> int | None:
    text = os.environ.get(TORCH_THREADS_ENV)
    if text is None or not text.strip():
        return None
    value: object = int(text) if text.strip().isdigit() else text  # "two", "-1": refused
    return check_torch_threads(value, TORCH_THREADS_ENV)


def resolve_profile(
    name: str,
    *,
    gpus: int | None = None,
    cpus: int | None = None,
    torch_threads: int | None = None,
) -> HardwarePlan:
    """The plan for a profile name; `auto` picks by the GPUs this host has. `cpus`: the cores
    given to the run (default: those this process may use); `torch_threads` overrides the
    driver's threads (else $RL_HARNESS_TORCH_THREADS, else $OMP_NUM_THREADS, else one per core
    the plan leaves it)."""
    plan = _resolve_resources(name, gpus=gpus, cpus=cpus)
    if torch_threads is not None:
        return replace(
            plan, torch_threads=check_torch_threads(torch_threads), torch_threads_from="option"
        )
    from_env = _env_torch_threads()
    if from_env is not None:
        return replace(plan, torch_threads=from_env, torch_threads_from=TORCH_THREADS_ENV)
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:  # the user's own thread setting, as torch reads it
        return replace(plan, torch_threads=int(omp), torch_threads_from="OMP_NUM_THREADS")
    return plan


def _resolve_resources(name: str, *, gpus: int | None, cpus: int | None) -> HardwarePlan:
    check_profile(name)
    cpus = _cpu_budget() if cpus is None else cpus
    if name == "auto":
        gpus = gpu_count() if gpus is None else gpus
        chosen = "cpu-local" if gpus == 0 else "single-gpu" if gpus == 1 else "multi-gpu"
        return replace(_resolve_resources(chosen, gpus=gpus, cpus=cpus), requested="auto")
    if name == "cpu-local":
        # Sampling in the driver process: deterministic and the cheapest on a laptop.
        return HardwarePlan(
            name,
            name,
            num_env_runners=0,
            num_learners=0,
            num_gpus_per_learner=0,
            torch_threads=max(1, cpus),
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
            torch_threads=max(1, cpus - runners),
        )
    gpus = gpu_count() if gpus is None else gpus
    learners = max(2, gpus)
    return HardwarePlan(
        name,
        name,
        num_env_runners=runners,
        num_learners=learners,
        num_gpus_per_learner=1,
        torch_threads=max(1, cpus - runners - learners),
    )


def apply_torch_threads(plan: HardwarePlan) -> None:
    """Set torch's intra-op threads in this process to the plan's (torch's own default is
    every core of the machine, however many other processes share them: on a loaded 2-core
    host one smoke iteration took 129-149 s with it and 5.6-5.8 s with one thread)."""
    import torch

    if torch.get_num_threads() != plan.torch_threads:
        torch.set_num_threads(plan.torch_threads)


def apply_hardware(config: AlgorithmConfig, plan: HardwarePlan) -> AlgorithmConfig:
    """A copy of `config` with the plan's resources (scientific settings are untouched), and
    the driver's torch threads set to the plan's (`apply_torch_threads`)."""
    apply_torch_threads(plan)
    config = config.copy(copy_frozen=False)
    config.env_runners(
        num_env_runners=plan.num_env_runners,
        num_cpus_per_env_runner=plan.num_cpus_per_env_runner,
    )
    config.learners(num_learners=plan.num_learners, num_gpus_per_learner=plan.num_gpus_per_learner)
    return config


def cpu_model() -> str:
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
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_available": _cpu_budget(),
        "memory_bytes": _memory_bytes(),
        "gpus": gpu_info(),
        "threads": thread_settings(),
        "numerics": numerics_facts(),
    }


# CPU features that pick other compute kernels (torch's ATen and MKL, NumPy's SIMD loops,
# OpenBLAS's DYNAMIC_ARCH): x86 vector and matrix units, Arm's SIMD and scalable vectors.
KERNEL_FLAG_PREFIXES = ("avx", "amx", "fma", "f16c", "asimd", "sve")
# Variables that override those choices (torch's capability, MKL's conditional numerical
# reproducibility, OpenBLAS's core type, NumPy's dispatch): set or not, they count.
KERNEL_ENV = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
)


def numerics_facts() -> dict[str, Any]:
    """What, beyond the code, the seed and the thread count, can change float results between
    two machines (manifest `hardware.numerics`): the CPU features that choose kernels, the
    kernels torch and NumPy chose, their builds and BLAS libraries, and the variables that
    override the choice. None where a fact cannot be read here (no /proc/cpuinfo), and for
    torch and NumPy while this process has not imported them: importing torch only to record
    it took over a minute on a loaded 2-core host; the run's end record reads them again."""
    return {
        "cpu_flags": _cpu_kernel_flags(),
        **_torch_numerics(),
        **_numpy_numerics(),
        "env": {name: os.environ.get(name) for name in KERNEL_ENV},
    }


@functools.cache  # the CPU does not change under a running process
def _cpu_kernel_flags() -> list[str] | None:
    """The kernel-choosing flags of /proc/cpuinfo ("flags" on x86, "Features" on Arm)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return sorted(
                        flag for flag in value.split() if flag.startswith(KERNEL_FLAG_PREFIXES)
                    )
    except OSError:
        pass
    return None


def _torch_numerics() -> dict[str, str | None]:
    """torch's build (`2.15.0+cu132`: the package version leaves the variant out), the CPU
    kernels it dispatches to (`get_cpu_capability`: DEFAULT, AVX2, AVX512, ...) and its BLAS."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"torch_build": None, "torch_cpu_capability": None, "torch_blas": None}
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    return {
        "torch_build": str(torch.__version__),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_blas": " ".join(
            part for part in (blas and blas.group(1), mkl and mkl.group(1)) if part
        )
        or None,
    }


def _numpy_numerics() -> dict[str, Any]:
    """NumPy's BLAS (name and version) and the SIMD extensions it found on this CPU."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return {"numpy_blas": None, "numpy_simd": None}
    config = numpy.show_config(mode="dicts") or {}
    blas = (config.get("Build Dependencies") or {}).get("blas") or {}
    simd = (config.get("SIMD Extensions") or {}).get("found")
    name = " ".join(str(blas[key]) for key in ("name", "version") if blas.get(key))
    return {"numpy_blas": name or None, "numpy_simd": list(simd) if simd else None}
