"""Which runs a reader lists: `rl-harness runs --status S --budget B --library-commit C`.

A pure selection over `RunRecord`s; each filter given must hold (filters combine with AND,
repeated values of one filter with OR). Statuses are the ones readers report (`crashed` for a
running record whose process is gone); commits match by prefix, case-insensitively, as git
abbreviates them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rl_harness.harness.interrupts import CRASHED, FINAL_STATUSES, RUNNING
from rl_harness.harness.runtools.records import RunRecord, RunToolError

STATUSES = (RUNNING, *FINAL_STATUSES, CRASHED)


@dataclass(frozen=True)
class RunFilter:
    """What to keep; an empty tuple keeps every value of that field."""

    statuses: tuple[str, ...] = ()
    budgets: tuple[str, ...] = ()
    library_commits: tuple[str, ...] = ()  # prefixes of the manifest's library.commit

    def checked(self) -> RunFilter:
        """RunToolError naming a status readers never report, or a commit that is not hex."""
        for status in self.statuses:
            if status not in STATUSES:
                raise RunToolError(f"unknown status {status!r}; choose from {', '.join(STATUSES)}")
        for commit in self.library_commits:
            if not commit or any(c not in "0123456789abcdefABCDEF" for c in commit):
                raise RunToolError(f"--library-commit takes a commit (hex prefix), got {commit!r}")
        return self

    def keeps(self, record: RunRecord) -> bool:
        if self.statuses and record.status not in self.statuses:
            return False
        if self.budgets and (record.budget or "-") not in self.budgets:
            return False
        commit = str(record.section("library").get("commit") or "").lower()
        if self.library_commits and not any(
            commit.startswith(prefix.lower()) for prefix in self.library_commits
        ):
            return False
        return True


def select_runs(records: Sequence[RunRecord], run_filter: RunFilter) -> list[RunRecord]:
    """The records `run_filter` keeps, in their order."""
    run_filter = run_filter.checked()
    return [record for record in records if run_filter.keeps(record)]
