"""Offer search filters, the quarantine list, and the documented ranking score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import VastClient


@dataclass(frozen=True)
class OfferFilters:
    gpu_name: str | None = None  # exact vast name, e.g. "RTX 4090"
    num_gpus: int = 1
    min_gpu_ram_gb: float | None = None  # per card
    max_dph: float | None = None  # $/hour, whole offer
    min_reliability: float = 0.95
    min_cuda: float | None = None  # highest CUDA the driver supports, e.g. 12.4
    disk_gb: float = 40.0  # disk to allocate; also priced into dph_total by the search
    interruptible: bool = False
    limit: int = 200

    def __post_init__(self) -> None:
        if self.num_gpus < 1:
            raise ValueError(f"num_gpus must be >= 1, got {self.num_gpus}")
        if not 0.0 <= self.min_reliability <= 1.0:
            raise ValueError(f"min_reliability must be in [0, 1], got {self.min_reliability}")
        if self.disk_gb < 8:
            raise ValueError(f"vast requires at least 8 GB of disk, got {self.disk_gb}")
        if self.max_dph is not None and self.max_dph <= 0:
            raise ValueError(f"max_dph must be positive, got {self.max_dph}")


def build_query(
    filters: OfferFilters, exclude_machines: frozenset[int] = frozenset()
) -> dict[str, Any]:
    """The `q` object for GET /bundles/ (vast field names; gpu_ram is in MB there)."""
    q: dict[str, Any] = {
        "verified": {"eq": True},
        "external": {"eq": False},
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "num_gpus": {"eq": filters.num_gpus},
        "reliability": {"gte": filters.min_reliability},
        "disk_space": {"gte": filters.disk_gb},
        "allocated_storage": filters.disk_gb,
        "type": "bid" if filters.interruptible else "on-demand",
        "order": [["dlperf_per_dphtotal", "desc"]],
        "limit": filters.limit,
    }
    if filters.gpu_name:
        q["gpu_name"] = {"eq": filters.gpu_name}
    if filters.min_gpu_ram_gb is not None:
        q["gpu_ram"] = {"gte": filters.min_gpu_ram_gb * 1000.0}
    if filters.max_dph is not None and not filters.interruptible:
        # For interruptible offers the price we pay is our bid, checked locally instead.
        q["dph_total"] = {"lte": filters.max_dph}
    if filters.min_cuda is not None:
        q["cuda_max_good"] = {"gte": filters.min_cuda}
    if exclude_machines:
        q["machine_id"] = {"notin": sorted(exclude_machines)}
    return q


@dataclass(frozen=True)
class Offer:
    id: int
    machine_id: int
    gpu_name: str
    num_gpus: int
    gpu_ram_gb: float
    dph: float  # $/hour we would pay: dph_total on demand, our bid when interruptible
    reliability: float
    dlperf: float
    cuda: float | None
    disk_gb: float
    min_bid: float | None

    @property
    def score(self) -> float:
        return offer_score(self.dlperf, self.dph, self.reliability)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "score": round(self.score, 4)}


def offer_score(dlperf: float, dph: float, reliability: float) -> float:
    """Expected useful performance per dollar: reliability * dlperf / ($/hour).

    dlperf is vast's deep-learning throughput estimate, so dlperf/dph is work per dollar;
    a box that dies wastes its whole run, so the chance it survives (reliability) scales it.
    """
    if dph <= 0:
        return 0.0
    return reliability * dlperf / dph


def parse_offer(
    raw: dict[str, Any], *, interruptible: bool = False, bid_factor: float = 1.25
) -> Offer:
    """One /bundles/ row as an Offer; interruptible offers are priced at our bid."""
    min_bid = raw.get("min_bid")
    dph = float(raw.get("dph_total") or 0.0)
    if interruptible and min_bid is not None:
        dph = round(float(min_bid) * bid_factor, 4)
    reliability = raw.get("reliability", raw.get("reliability2", 0.0))
    return Offer(
        id=int(raw["id"]),
        machine_id=int(raw.get("machine_id", -1)),
        gpu_name=str(raw.get("gpu_name", "?")),
        num_gpus=int(raw.get("num_gpus", 0)),
        gpu_ram_gb=float(raw.get("gpu_ram") or 0.0) / 1000.0,
        dph=dph,
        reliability=float(reliability or 0.0),
        dlperf=float(raw.get("dlperf") or 0.0),
        cuda=float(raw["cuda_max_good"]) if raw.get("cuda_max_good") is not None else None,
        disk_gb=float(raw.get("disk_space") or 0.0),
        min_bid=float(min_bid) if min_bid is not None else None,
    )


def rank_offers(
    raw_offers: list[dict[str, Any]],
    filters: OfferFilters,
    quarantined: frozenset[int] = frozenset(),
    *,
    bid_factor: float = 1.25,
) -> list[Offer]:
    """Parse, re-check every filter locally (the server's filtering is not trusted), drop
    quarantined machines, and sort by score (desc), then price (asc), then id."""
    out: list[Offer] = []
    for raw in raw_offers:
        offer = parse_offer(raw, interruptible=filters.interruptible, bid_factor=bid_factor)
        if offer.machine_id in quarantined:
            continue
        if offer.num_gpus != filters.num_gpus or offer.reliability < filters.min_reliability:
            continue
        if filters.gpu_name and offer.gpu_name != filters.gpu_name:
            continue
        if filters.min_gpu_ram_gb is not None and offer.gpu_ram_gb < filters.min_gpu_ram_gb:
            continue
        if filters.max_dph is not None and offer.dph > filters.max_dph:
            continue
        if filters.min_cuda is not None and (offer.cuda is None or offer.cuda < filters.min_cuda):
            continue
        if offer.disk_gb and offer.disk_gb < filters.disk_gb:
            continue
        out.append(offer)
    out.sort(key=lambda o: (-o.score, o.dph, o.id))
    return out


def find_offers(
    client: VastClient, filters: OfferFilters, quarantined: frozenset[int] = frozenset()
) -> list[Offer]:
    """vast's offers for `filters`, quarantined machines excluded, ranked (`rank_offers`)."""
    raw = client.search_offers(build_query(filters, quarantined))
    return rank_offers(raw, filters, quarantined)


def pick_offers(ranked: list[Offer], count: int) -> list[Offer]:
    """The best `count` offers, at most one per machine (a bad host then sinks one run)."""
    chosen: list[Offer] = []
    machines: set[int] = set()
    for offer in ranked:
        if offer.machine_id in machines:
            continue
        chosen.append(offer)
        machines.add(offer.machine_id)
        if len(chosen) == count:
            break
    return chosen


# -- quarantine ------------------------------------------------------------------------------


def read_quarantine(path: Path) -> frozenset[int]:
    """Machine ids, one per line; `#` starts a comment. A missing file quarantines nothing."""
    path = Path(path)
    if not path.exists():
        return frozenset()
    ids: set[int] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            ids.add(int(text))
        except ValueError:
            raise ValueError(f"{path}:{number}: not a machine id: {text!r}") from None
    return frozenset(ids)


def add_to_quarantine(path: Path, machine_id: int, reason: str = "") -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if int(machine_id) in read_quarantine(path):
        return
    suffix = f"  # {reason.strip()}" if reason.strip() else ""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{int(machine_id)}{suffix}\n")
