"""The cost guard holds for replacement boxes too, not only for the first rentals.

When a chosen offer is taken meanwhile (410 `no_such_ask`), `up` replaces it by a spare. The
spare must fit the hourly budget that is *left*: `--max-total-dollars / --max-hours` minus the
boxes already rented and minus the boxes still planned. Offers (fake_vast.make_offers) cost
0.30, 0.35, 0.40, 0.45, 0.50, 0.55 $/h on distinct machines, ranked cheapest first; every
launch here runs two boxes for `--max-hours 2` through the real CLI against the fake server.
"""

from __future__ import annotations

import pytest
from vast_support import up_args

from rl_harness.cli.vast import main
from rl_harness.devops.vast.state import StateFile

MAX_HOURS = 2.0  # up_args passes --max-hours 2


def _created_offers(fake_vast) -> list[int]:
    return [int(c.path.rstrip("/").rsplit("/", 1)[1]) for c in fake_vast.creates()]


def test_a_replacement_that_fits_only_the_whole_budget_is_refused(
    vast_env, fake_vast, repos, capsys
):
    # Budget $1.36 / 2 h = 0.68 $/h. The plan (0.30 + 0.35 = 0.65 $/h, worst case $1.30) fits.
    # Box 1's offer is gone; box 0 (0.30 $/h) is already rented, so 0.38 $/h are left and the
    # cheapest spare (0.40) does not fit, although it fits the whole 0.68 $/h.
    fake_vast.gone_offers = {901}
    code = main(up_args(repos, "-n", "2", "--max-total-dollars", "1.36"))
    printed = capsys.readouterr()
    assert code == 1, printed.out + printed.err
    assert "the offer was taken and no spare offer fits the budget" in printed.err
    assert "destroyed the 1 already created" in printed.err
    assert _created_offers(fake_vast) == [900, 901]  # no spare was even tried
    assert fake_vast.instances == {}  # the box already rented was rolled back
    (record,) = StateFile(vast_env).records()
    assert record.offer_id == 900 and record.status == "destroyed"


def test_a_replacement_that_fits_the_budget_left_is_rented(vast_env, fake_vast, repos, capsys):
    # Budget $1.42 / 2 h = 0.71 $/h; after box 0 (0.30) 0.41 $/h are left: the 0.40 spare fits.
    fake_vast.gone_offers = {901}
    code = main(up_args(repos, "-n", "2", "--max-total-dollars", "1.42"))
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert _created_offers(fake_vast) == [900, 901, 902]
    records = StateFile(vast_env).active()
    assert sorted(r.offer_id for r in records) == [900, 902]
    assert sum(r.dph for r in records) * MAX_HOURS == pytest.approx(1.40)
    assert sum(r.dph for r in records) * MAX_HOURS <= 1.42


def test_replacing_an_early_box_leaves_room_for_the_boxes_still_planned(
    vast_env, fake_vast, repos, capsys
):
    # Budget 0.68 $/h again, but now box 0's offer is gone. Box 1 (0.35 $/h) is still to be
    # rented, so box 0 may cost at most 0.33 $/h: no spare fits. Taking the 0.40 spare would
    # rent 0.75 $/h, a worst case of $1.50 over the $1.36 limit.
    fake_vast.gone_offers = {900}
    code = main(up_args(repos, "-n", "2", "--max-total-dollars", "1.36"))
    printed = capsys.readouterr()
    assert code == 1, printed.out + printed.err
    assert "no spare offer fits the budget" in printed.err
    assert _created_offers(fake_vast) == [900]
    assert fake_vast.instances == {}
    assert StateFile(vast_env).records() == []


def test_every_launch_that_rents_stays_within_the_limit(vast_env, fake_vast, repos, capsys):
    # Three boxes, the first two offers gone one after the other: two replacements in a row.
    # Budget $2.72 / 2 h = 1.36 $/h; plan 0.30 + 0.35 + 0.40 = 1.05 $/h.
    fake_vast.gone_offers = {900, 901}
    code = main(up_args(repos, "-n", "3", "--max-total-dollars", "2.72"))
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    records = StateFile(vast_env).active()
    # Box 0 -> 903 (0.45; 902 is box 2's), box 1 -> 904 (0.50): 0.45 + 0.50 + 0.40 = 1.35 $/h.
    assert sorted(r.offer_id for r in records) == [902, 903, 904]
    assert sum(r.dph for r in records) * MAX_HOURS <= 2.72
    assert len({r.machine_id for r in records}) == 3
