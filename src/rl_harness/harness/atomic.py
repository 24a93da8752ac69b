"""Atomic file writes: a reader sees the old file or the new one, never half of one.

JSON records hold plain JSON values only: NumPy scalars and arrays are converted exactly
(integers stay integers, `np.float32(0.5)` becomes `0.5`), paths become strings, and anything
else fails with one error naming its key path, instead of silently turning into a string.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any


class JSONValueError(TypeError):
    """A value that has no exact JSON form; the message names its key path."""


def _describe(path: str) -> str:
    return f"key {path!r}" if path else "the top level"


def _key(key: Any, path: str) -> str:
    """A mapping key as JSON writes it (json's own spelling of numbers, bools and None)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if type(key).__module__ == "numpy" and hasattr(key, "dtype") and key.dtype.kind in "biu":
        key = key.item()
    if isinstance(key, int | float):
        return json.dumps(key)
    raise JSONValueError(
        f"cannot write a {type(key).__name__} mapping key {key!r} under {_describe(path)} as JSON"
    )


def to_json_value(obj: Any, path: str = "") -> Any:
    """`obj` as plain JSON values (dict, list, str, int, float, bool, None).

    NumPy: bool_ -> bool, integers -> int, floating -> float (exact: a float32 widens to the
    same number), arrays -> nested lists of those. Tuples become lists, paths strings. Any
    other type raises `JSONValueError` naming the key path ("a/b/0").
    """
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, str):
        return str(obj)  # also a str subclass such as numpy.str_
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, Mapping):
        converted: dict[str, Any] = {}
        for key, value in obj.items():
            name = _key(key, path)
            converted[name] = to_json_value(value, f"{path}/{name}" if path else name)
        return converted
    if isinstance(obj, list | tuple):
        return [to_json_value(v, f"{path}/{i}" if path else str(i)) for i, v in enumerate(obj)]
    if isinstance(obj, PurePath):
        return str(obj)
    numpy = _numpy_value(obj, path)
    if numpy is not _NOT_NUMPY:
        return numpy
    raise JSONValueError(
        f"cannot write {type(obj).__module__}.{type(obj).__qualname__} at {_describe(path)} "
        "as JSON (numbers, str, bool, None, lists, tuples, mappings, paths and NumPy scalars "
        "and arrays can be written)"
    )


def json_value_keeping(record: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`record` as plain JSON values, leaving out each top-level or nested mapping key whose
    value has no exact JSON form (a bad list element leaves out the list's key). Returns the
    kept record and the keys left out: key path -> why (`to_json_value`'s message)."""
    dropped: dict[str, str] = {}

    def keep(mapping: Mapping[str, Any], path: str) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, value in mapping.items():
            try:
                name = _key(key, path)
            except JSONValueError as error:
                dropped[f"{path}/{key!r}" if path else repr(key)] = str(error)
                continue
            inner = f"{path}/{name}" if path else name
            if isinstance(value, Mapping):
                kept[name] = keep(value, inner)
                continue
            try:
                kept[name] = to_json_value(value, inner)
            except JSONValueError as error:
                dropped[inner] = str(error)
        return kept

    return keep(record, ""), dropped


_NOT_NUMPY = object()


def _numpy_value(obj: Any, path: str) -> Any:
    if type(obj).__module__ != "numpy":
        return _NOT_NUMPY
    import numpy as np

    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        return obj.tolist()  # Python ints and floats, exactly
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "OU":
        return to_json_value(obj.tolist(), path)
    return _NOT_NUMPY


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temp file in the same folder, fsync it, then rename over `path`.

    The file gets the mode a plain `open()` would (0666 less the umask), so teammates on a
    shared machine can read the records; `tempfile.mkstemp` would make it 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def json_text(obj: Any) -> str:
    """Pretty, key-sorted JSON of `obj` (see `to_json_value`), with a final newline."""
    return json.dumps(to_json_value(obj), indent=2, sort_keys=True) + "\n"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Pretty, key-sorted JSON (stable diffs in results/), written atomically.

    Raises `JSONValueError` (naming the key) for a value with no exact JSON form.
    """
    write_text_atomic(path, json_text(obj))


def append_json_line(path: Path, row: Mapping[str, Any]) -> None:
    """Append one key-sorted JSON line, flushed and fsynced (a crash loses no whole row)."""
    line = json.dumps(to_json_value(row), sort_keys=True) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


class RecordReadError(ValueError):
    """A JSON record that cannot be read; the message names the file and why."""


def read_record(path: Path) -> Any:
    """A JSON record for a reader that reports bad files (not JSON, not UTF-8, unreadable)
    as one line instead of a traceback: RecordReadError."""
    try:
        return read_json(path)
    except json.JSONDecodeError as error:
        raise RecordReadError(f"{path} is corrupt (not valid JSON: {error})") from None
    except UnicodeDecodeError:
        raise RecordReadError(f"{path} is corrupt (not UTF-8 text)") from None
    except OSError as error:
        raise RecordReadError(f"{path} cannot be read ({error.strerror or error})") from None
