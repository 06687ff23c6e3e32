"""What a search for a leaked secret must read in a file: its bytes and what they encode.

A Prefect result is a pickle, base64 inside its JSON record, and a Parquet table's pages may be compressed: a grep of
the bytes alone cannot see a secret in either (tests/test_no_host_file_leaks.py's control showed it: the stored
results held the compile log with `root:x:0`, and a byte grep found nothing).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.parquet as pq


def readable(path: Path) -> bytes:
    """A file's bytes, followed by the values a Parquet table or a Prefect result record encodes."""
    data = path.read_bytes()
    if path.suffix == ".parquet":
        return data + repr(pq.read_table(path).to_pylist()).encode()
    if data.startswith(b'{"metadata"'):
        record = json.loads(data)
        assert record["metadata"]["serializer"]["type"] == "pickle", record["metadata"]  # else: decode it here too
        return data + base64.b64decode(record["result"])
    return data
