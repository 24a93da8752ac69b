"""Plant a fixed list of realistic one-line bugs, one at a time, and check the tests catch each.

    python3 -m uv run python tools/mutation_check.py            # all mutations
    python3 -m uv run python tools/mutation_check.py --list     # what would be planted
    python3 -m uv run python tools/mutation_check.py aux-mask   # just the named ones

Each mutation names its file, the exact original text and its replacement, and the tests
that must fail on it ("kill" it). The file is edited in place and always restored byte for
byte (and to its old mtime) before the next one, on Ctrl-C and SIGTERM too. First the named
tests run on the unmutated code: a mutant is only "killed" if they passed there. Exit code
0 when every mutant is killed; 1 when one survives; 2 when the list is stale (an original
text no longer occurs exactly once: update the entry with the code it guards).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "rl_harness"


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # relative to src/rl_harness
    edits: tuple[tuple[str, str], ...]  # (original text, mutant text), each original unique
    tests: tuple[str, ...]  # pytest node ids that must fail on the mutant
    why: str


MUTATIONS = [
    Mutation(
        "redaction-token",
        "harness/redaction.py",
        (
            (
                "(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL)",
                "(KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)",
            ),
        ),
        ("tests/harness/test_redaction_names.py",),
        "GH_TOKEN-style values would reach manifests and logs",
    ),
    Mutation(
        "final-checkpoint-only-on-completed",
        "harness/runners.py",
        (
            (
                "and status != FAILED",
                "and status == COMPLETED",
            ),
        ),
        ("tests/harness/test_interrupted_checkpoint.py",),
        "an interrupted run would lose its last checkpoint",
    ),
    Mutation(
        "aux-mask",
        "losses/aux_mixins.py",
        (
            (
                "loss = masked_cross_entropy(logits, targets, mask)",
                "loss = masked_cross_entropy(logits, targets)",
            ),
        ),
        ("tests/losses/test_aux_mask.py",),
        "padded and invalid steps would count in the auxiliary loss",
    ),
    Mutation(
        "probe-bootstrap-over-samples",
        "analysis/probes/evaluate.py",
        (
            (
                "per_episode = episode_sums(y[test], test_pred, reference)",
                "per_episode = episode_sums("
                "y[test].reshape(-1, 1, k), test_pred.reshape(-1, 1, k), reference)",
            ),
            (
                "bootstrap_weights(len(test), n_bootstrap",
                "bootstrap_weights(len(per_episode.count), n_bootstrap",
            ),
        ),
        ("tests/analysis/test_probe_bootstrap_episodes.py",),
        "probe intervals would be too narrow when steps within an episode are correlated",
    ),
    Mutation(
        "plot-predictions-panel",
        "analysis/plots.py",
        (
            (
                "panels.append((predicted_beliefs, labels[1]))",
                "panels.append((true_beliefs, labels[1]))",
            ),
        ),
        ("tests/analysis/test_plot_positions.py",),
        "the prediction panel would show the true beliefs",
    ),
    Mutation(
        "transformer-post-norm",
        "learners/components/transformer.py",
        (("norm_first=True,", "norm_first=False,"),),
        ("tests/learners/test_transformer_values.py",),
        "a post-norm transformer, not the documented pre-norm one",
    ),
    Mutation(
        "transformer-no-causal-mask",
        "learners/components/transformer.py",
        (
            (
                "h = self.layers(h, mask=self.causal_mask[:width, :width], is_causal=True)",
                "h = self.layers(h)",
            ),
        ),
        (
            "tests/learners/test_learner_components.py::test_transformer_is_causal",
            "tests/learners/test_transformer_values.py::test_token_input_is_causal_at_every_position",
        ),
        "positions would see the future",
    ),
    Mutation(
        "context-unchecked-artifacts-dir",
        "harness/context.py",
        (('    _check_base("artifacts dir", artifacts_base)\n', ""),),
        ("tests/harness/test_rejected_run_leaves_nothing.py",),
        "a rejected run would leave an orphan results/<id>/",
    ),
    Mutation(
        "masked-mean-denominator",
        "losses/classification.py",
        (
            (
                "return (values * weights).sum() / weights.sum().clamp_min(1.0)",
                "return (values * weights).sum() / weights.numel()",
            ),
        ),
        ("tests/losses/test_losses_classification.py",),
        "masked steps would dilute the mean",
    ),
    Mutation(
        "belief-unnormalized",
        "envs/hmm/beliefs.py",
        (("    return unnormalized / norm\n", "    return unnormalized\n"),),
        ("tests/envs/test_beliefs.py",),
        "beliefs would not be probability vectors",
    ),
    Mutation(
        "seed-upper-bound",
        "harness/context.py",
        (("if not 0 <= seed <= MAX_SEED:", "if not 0 <= seed <= MAX_SEED + 1:"),),
        ("tests/harness/test_context.py::test_bad_seed_rejected",),
        "seed 2**32 would be accepted (NumPy and RLlib reject it mid-run)",
    ),
    Mutation(
        "split-without-train-episode",
        "analysis/probes/split.py",
        (
            (
                "n_test = min(n_episodes - 1, max(1, round(test_fraction * n_episodes)))",
                "n_test = max(1, round(test_fraction * n_episodes))",
            ),
        ),
        ("tests/analysis/test_probes.py::test_split_is_by_episode_and_seeded",),
        "a large test fraction would leave no episode to fit the probe on",
    ),
    Mutation(
        "r2-pooled-denominator",
        "analysis/probes/scores.py",
        (("sst_all = (sst * keep).sum(axis=-1)", "sst_all = (sst * keep).sum(axis=-1) + 1.0"),),
        ("tests/analysis/test_probes.py::test_scores_match_direct_formulas",),
        "pooled R² would not be 1 - SSE/SST",
    ),
]


class _Stop(BaseException):
    """SIGTERM, raised in the main thread so the restore in `finally` runs."""


def _on_sigterm(signum, _frame):
    raise _Stop(signum)


def _pytest(tests: tuple[str, ...], timeout: float) -> tuple[int, float, str]:
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - started, "timed out"
    tail = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, time.perf_counter() - started, tail[-1] if tail else ""


def _stale(mutation: Mutation) -> str | None:
    path = SRC / mutation.file
    if not path.is_file():
        return f"{mutation.file} does not exist"
    text = path.read_text()
    for original, _ in mutation.edits:
        if text.count(original) != 1:
            return f"{mutation.file}: {original!r} occurs {text.count(original)} times, not once"
    return None


def run_one(mutation: Mutation, timeout: float) -> tuple[str, float, str]:
    path = SRC / mutation.file
    original_bytes = path.read_bytes()
    stat = path.stat()
    text = original_bytes.decode()
    for original, mutant in mutation.edits:
        text = text.replace(original, mutant)
    try:
        path.write_text(text)
        # A different mtime invalidates the cached bytecode of the original (and vice versa).
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))
        code, seconds, tail = _pytest(mutation.tests, timeout)
    finally:
        path.write_bytes(original_bytes)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # 1: tests failed; 2: collection/import error caused by the mutant. Both kill it.
    verdict = {0: "SURVIVED", 1: "killed", 2: "killed"}.get(code, "error")
    return verdict, seconds, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutations (default: all)")
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per pytest run")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip running the tests unmutated first"
    )
    args = parser.parse_args(argv)
    known = {m.name: m for m in MUTATIONS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown mutation(s) {unknown}; known: {', '.join(known)}")
    chosen = [known[n] for n in args.names] if args.names else MUTATIONS

    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.file} ({m.why})")
            for original, mutant in m.edits:
                print(f"    - {original.strip()}\n    + {mutant.strip()}")
            print(f"    killed by: {' '.join(m.tests)}")
        return 0

    stale = [(m.name, problem) for m in chosen if (problem := _stale(m))]
    for name, problem in stale:
        print(f"mutation_check: stale entry {name}: {problem}", file=sys.stderr)
    if stale:
        return 2

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
            code, seconds, tail = _pytest(tests, args.timeout * 2)
            print(f"baseline ({len(tests)} test targets, unmutated): {tail} [{seconds:.0f} s]")
            if code != 0:
                print("mutation_check: the tests fail without any mutation", file=sys.stderr)
                return 2
        results = []
        for m in chosen:
            verdict, seconds, tail = run_one(m, args.timeout)
            results.append(verdict)
            print(f"{verdict:<8} {m.name:<36} {seconds:6.1f} s  {tail}", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    killed = results.count("killed")
    print(f"{killed}/{len(results)} mutants killed")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
