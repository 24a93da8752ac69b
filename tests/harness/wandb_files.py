"""Read a W&B offline run file (run-<id>.wandb): the records wandb wrote, as protobufs.

The file is wandb's append-only log: a 7-byte header (":W&B", magic, version), then
LevelDB-log-style chunks (crc32 4 bytes, length 2 bytes little-endian, type 1 byte: 1 full,
2 first, 3 middle, 4 last) in 32 KiB blocks; each whole record is a serialized
`wandb_internal_pb2.Record`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK, HEADER = 32768, 7


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    found, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
    return found


def history(path: Path) -> list[dict]:
    """The logged rows: {key: value} per `run.log` call, with its `_step`."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return rows


def run_record(path: Path) -> wandb_internal_pb2.RunRecord:
    return next(r.run for r in records(path) if r.WhichOneof("record_type") == "run")
