"""Issue 52 item 1 (machine): a run rebuilt on another machine differs at float rounding with
nothing else changed; `rl-harness diff` and `reproduce` say so in one line naming the fields
and both values. The diff runs through the installed `rl-harness` command on copies of a
committed flagship run whose manifests are edited as another machine would have written them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.hardware import numerics_facts
from rl_harness.harness.runtools.machine import (
    CONSEQUENCE,
    machine_differences,
    machine_facts,
    machine_note,
    this_machine,
)
from tests.tools import recipes
from tests.tools.helpers import manifest, run_dirs, run_leaf, write_leaf

REPO = Path(__file__).resolve().parents[2]
# A committed run (flagship, library commit d2c7c58): its manifest predates hardware.numerics.
COMMITTED = (
    REPO / "examples/rl-experiments/experiments/mess3_belief_geometry/reward_only/results"
    "/20261205T130252Z-6d2c888d"
)
RL_HARNESS = str(Path(sys.executable).parent / "rl-harness")  # what `uv run rl-harness` runs
OTHER_OS = "Linux-6.18.44-fc-v1300-x86_64-with-glibc2.36"


def _copy(tmp_path: Path, name: str, edit=None) -> Path:
    folder = tmp_path / name
    shutil.copytree(COMMITTED, folder)
    record = manifest(folder)
    record["run_id"] = name
    if edit is not None:
        edit(record["hardware"])
    (folder / "run_manifest.json").write_text(json.dumps(record, indent=2))
    return folder


def _diff(a: Path, b: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RL_HARNESS, "diff", str(a), str(b)], capture_output=True, text=True, timeout=300
    )


def _notes(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("note: ")]


def test_diff_names_the_machine_fields_with_both_values(tmp_path: Path) -> None:
    recorded_os = manifest(COMMITTED)["hardware"]["os"]
    assert recorded_os != OTHER_OS
    a = _copy(tmp_path, "a")

    def other_host(hardware: dict) -> None:
        hardware["os"] = OTHER_OS
        hardware["cpu_model"] = "AMD EPYC 9654"
        hardware["hostname"] = "elsewhere"  # not a float fact: not in the note

    done = _diff(a, _copy(tmp_path, "b", other_host))
    assert done.returncode == 1, done.stderr  # something differs; still not an error (2)
    (note,) = _notes(done.stdout)
    assert note == (
        "note: the machine differs ("
        f"hardware.cpu_model: a AMD EPYC, b AMD EPYC 9654; "
        f"hardware.os: a {recorded_os}, b {OTHER_OS}): {CONSEQUENCE}"
    )
    assert "hostname" not in note
    assert "final metrics (timing keys ignored): 0 differ" in done.stdout
    assert done.stderr == ""


def test_diff_names_kernel_flags_and_torch_capability_where_both_record_them(
    tmp_path: Path,
) -> None:
    numerics = {
        "cpu_flags": ["avx", "avx2", "avx512f", "fma"],
        "torch_cpu_capability": "AVX512",
        "torch_build": "2.15.0+cu132",
        "env": {"MKL_CBWR": None},
    }

    def avx512(hardware: dict) -> None:
        hardware["numerics"] = numerics

    def avx2(hardware: dict) -> None:
        hardware["numerics"] = {
            **numerics,
            "cpu_flags": ["avx", "avx2", "fma"],
            "torch_cpu_capability": "AVX2",
            "env": {"MKL_CBWR": "COMPATIBLE"},
        }

    done = _diff(_copy(tmp_path, "a", avx512), _copy(tmp_path, "b", avx2))
    (note,) = _notes(done.stdout)
    assert "hardware.numerics.cpu_flags: only a has avx512f;" in note
    assert "hardware.numerics.torch_cpu_capability: a AVX512, b AVX2;" in note
    assert "hardware.numerics.env.MKL_CBWR: a None, b COMPATIBLE)" in note
    assert "torch_build" not in note and "hardware.os" not in note

    # An older manifest (no numerics) against a new one: only what both record is compared.
    done = _diff(_copy(tmp_path, "old"), _copy(tmp_path, "new", avx512))
    assert _notes(done.stdout) == []


def test_the_same_machine_gives_no_note(tmp_path: Path) -> None:
    done = _diff(_copy(tmp_path, "a"), _copy(tmp_path, "b"))
    assert done.returncode == 0, done.stdout  # nothing compared differs (run ids are not)
    assert _notes(done.stdout) == []


def test_this_machine_reads_as_a_manifest_records_it() -> None:
    here = this_machine()
    import torch

    assert here["hardware.numerics.torch_cpu_capability"] == (
        torch.backends.cpu.get_cpu_capability()
    )
    assert here["hardware.numerics.torch_build"] == torch.__version__
    assert here["hardware.numerics.cpu_flags"] == numerics_facts()["cpu_flags"]
    assert machine_note(machine_differences(here, dict(here))) is None
    # Fields a side does not record (None: not readable there) are not compared.
    older = machine_facts({"hardware": {"os": "x", "numerics": {"torch_cpu_capability": None}}})
    assert older == {"hardware.os": "x"}


@pytest.fixture
def committed_leaf(git_repo) -> Path:
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.SEEDED)
    git("add", "-A")
    git("commit", "-qm", "add leaf")
    return leaf


def test_reproduce_notes_another_machine_and_still_compares(committed_leaf: Path, capfd) -> None:
    original = run_leaf(committed_leaf, "--seed", "7", "--smoke")
    record = manifest(original)
    here = record["hardware"]["cpu_model"]
    assert record["hardware"]["numerics"]["torch_cpu_capability"]  # a new run records them
    record["hardware"]["cpu_model"] = "Another CPU"
    (original / "run_manifest.json").write_text(json.dumps(record))
    capfd.readouterr()
    assert main(["reproduce", str(original)]) == 0  # a note, not a refusal
    out, err = capfd.readouterr()
    assert (
        f"note: the machine differs (hardware.cpu_model: recorded Another CPU, here {here}): "
        f"{CONSEQUENCE}"
    ) in err.splitlines()
    assert "metrics: identical" in out and len(run_dirs(committed_leaf)) == 2
