"""Atomic writes and schema-checked Parquet reads."""

from __future__ import annotations

import pandas as pd
import pytest

from emergence.core.io import PipelineError, atomic_path, read_parquet, write_parquet


def test_atomic_path_keeps_old_file_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_atomic_path_replaces_directories_and_clears_stale_temps(tmp_path):
    target = tmp_path / "run"
    (target / "old").mkdir(parents=True)
    (tmp_path / ".run.abc.tmp").mkdir()  # what a SIGKILL mid-write leaves behind
    with atomic_path(target) as tmp:
        (tmp / "new").mkdir(parents=True)
    assert [p.name for p in target.iterdir()] == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_write_parquet_is_byte_deterministic(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [[1], [2, 3]]})
    write_parquet(df, tmp_path / "1.parquet")
    write_parquet(df, tmp_path / "2.parquet")
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()


def test_read_parquet_names_file_and_column(tmp_path):
    path = tmp_path / "t.parquet"
    write_parquet(pd.DataFrame({"a": ["1"]}), path)
    with pytest.raises(PipelineError, match=r"t.parquet: wrong schema, missing column 'b'"):
        read_parquet(path, {"b": "i"})
    with pytest.raises(PipelineError, match=r"t.parquet: wrong schema, column 'a'"):
        read_parquet(path, {"a": "i"})
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(PipelineError, match="x.parquet: not a readable Parquet file"):
        read_parquet(tmp_path / "x.parquet")
