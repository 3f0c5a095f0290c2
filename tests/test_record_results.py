"""results.jsonl: append-only, crash-safe, no duplicates; real files and real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot.record.errors import RecordFormatError
from bot.run.errors import DuplicateRecordError
from bot.run.log import ResultsLog, iteration_key

ROOT = Path(__file__).resolve().parents[1]


def test_append_writes_one_sorted_utf8_line_per_record_and_reads_back(tmp_path):
    path = tmp_path / "runs" / "demo" / "rms_norm" / "results.jsonl"  # directories are created
    log = ResultsLog(path)
    first = {"key": "baseline", "kind": "baseline", "latency": {"median_us": 25.4}, "note": "基线"}
    second = {
        "key": iteration_key(1),
        "kind": "iteration",
        "iteration": 1,
        "strategy": "block_size",
    }
    log.append(first)
    log.append(second)
    assert path.read_text(encoding="utf-8") == (
        '{"key": "baseline", "kind": "baseline", "latency": {"median_us": 25.4}, "note": "基线"}\n'
        '{"iteration": 1, "key": "iter:1", "kind": "iteration", "strategy": "block_size"}\n'
    )
    assert log.read() == [first, second]
    assert ResultsLog(path).read() == [first, second]  # a fresh reader sees the same


def test_reading_a_missing_file_gives_nothing(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl")
    assert log.read() == [] and not log.has("baseline") and log.get("baseline") is None


def test_a_duplicate_key_is_refused_and_nothing_is_written(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl")
    log.append({"key": "iter:3", "latency": 1.0})
    before = log.path.read_bytes()
    with pytest.raises(DuplicateRecordError, match="iter:3"):
        log.append({"key": "iter:3", "latency": 2.0})
    assert log.path.read_bytes() == before
    assert log.has("iter:3") and not log.has("iter:4")
    assert log.get("iter:3") == {"key": "iter:3", "latency": 1.0}


@pytest.mark.parametrize(
    "record,words",
    [
        ({"kind": "iteration"}, "needs a non-empty string 'key'"),
        ({"key": ""}, "needs a non-empty string 'key'"),
        ({"key": 3}, "needs a non-empty string 'key'"),
        ({"key": "iter:1", "latency": float("nan")}, "NaN"),
        ({"key": "iter:1", "when": object()}, "not plain JSON"),
    ],
)
def test_records_that_cannot_be_written_faithfully_are_refused(tmp_path, record, words):
    log = ResultsLog(tmp_path / "results.jsonl")
    with pytest.raises(ValueError, match=words):
        log.append(record)
    assert log.read() == []


def test_a_torn_final_line_is_cut_off_saved_and_the_log_keeps_working(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl")
    log.append({"key": "baseline", "kind": "baseline"})
    log.append({"key": "iter:1", "kind": "iteration"})
    whole = log.path.read_bytes()
    line = json.dumps(
        {"key": "iter:2", "kind": "iteration", "note": "中文"}, ensure_ascii=False
    ).encode()
    torn = line[
        : len(line) // 2 + 1
    ]  # half a line, cut inside a multi-byte character's neighbourhood
    with open(log.path, "ab") as f:  # what a crash mid-write leaves behind
        f.write(torn)

    assert [r["key"] for r in log.read()] == ["baseline", "iter:1"]
    assert log.path.read_bytes() == whole  # repaired on disk, not just skipped
    assert log.torn_path.read_bytes() == torn + b"\n"  # the torn bytes are kept
    log.append({"key": "iter:2", "kind": "iteration"})  # the redone iteration records cleanly
    assert [r["key"] for r in ResultsLog(log.path).read()] == ["baseline", "iter:1", "iter:2"]


def test_append_repairs_a_torn_tail_before_writing(tmp_path):
    log = ResultsLog(tmp_path / "results.jsonl")
    log.append({"key": "baseline"})
    with open(log.path, "ab") as f:
        f.write(b'{"key": "iter:1", "lat')
    log.append({"key": "iter:1", "latency": 3.0})  # not a duplicate: the torn one never counted
    assert log.read() == [{"key": "baseline"}, {"key": "iter:1", "latency": 3.0}]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write read-only files")
def test_a_read_only_copy_is_read_without_repair(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"key": "a"}\n{"key": "b')
    path.chmod(0o444)
    try:
        assert ResultsLog(path).read() == [{"key": "a"}]
        assert path.read_bytes() == b'{"key": "a"}\n{"key": "b'
    finally:
        path.chmod(0o644)


def test_a_file_holding_only_a_torn_line_reads_empty(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"key": "base')
    assert ResultsLog(path).read() == [] and path.read_bytes() == b""
    assert (tmp_path / "results.jsonl.torn").read_bytes() == b'{"key": "base\n'


def test_blank_lines_are_ignored(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"key": "a"}\n\n  \n{"key": "b"}\n', encoding="utf-8")
    assert [r["key"] for r in ResultsLog(path).read()] == ["a", "b"]


@pytest.mark.parametrize(
    "bad,words",
    [
        ("not json", "not valid JSON"),
        ('["key"]', "string 'key'"),
        ('{"kind": "stop"}', "string 'key'"),
    ],
)
def test_a_corrupt_complete_line_is_an_error_naming_the_line(tmp_path, bad, words):
    path = tmp_path / "results.jsonl"
    path.write_text('{"key": "a"}\n' + bad + '\n{"key": "b"}\n', encoding="utf-8")
    with pytest.raises(RecordFormatError) as info:
        ResultsLog(path).read()
    assert info.value.line == 2 and words in info.value.problem and info.value.exit_code == 2
    assert path.read_text(encoding="utf-8").count("\n") == 3  # never "repaired" away


WRITER = textwrap.dedent("""
    import sys
    from bot.run.log import ResultsLog
    log = ResultsLog(sys.argv[1])
    name, count, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print("ready", flush=True)
    for i in range(count):
        log.append({"key": f"{name}:{i}", "writer": name, "i": i, "payload": name * size})
""")


def _writer(path: Path, name: str, count: int, size: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), name, str(count), str(size)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_concurrent_appends_from_two_processes_never_interleave(tmp_path):
    path = tmp_path / "results.jsonl"
    # lines of ~100 KB: far over PIPE_BUF and the usual page size
    procs = [_writer(path, name, 40, 100_000) for name in ("a", "b")]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 81
    records = [json.loads(line) for line in lines[:-1]]  # every line is one whole record
    for name in ("a", "b"):
        mine = [r for r in records if r["writer"] == name]
        assert [r["i"] for r in mine] == list(range(40))
        assert all(r["payload"] == name * 100_000 for r in mine)
    assert not ResultsLog(path).torn_path.exists()


def test_sigkill_during_appends_leaves_only_whole_records(tmp_path):
    path = tmp_path / "results.jsonl"
    proc = _writer(path, "k", 100_000, 2_000)
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while (
        not path.exists() or path.read_bytes().count(b"\n") < 20
    ) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    log = ResultsLog(path)
    records = log.read()
    assert len(records) >= 20
    assert [r["i"] for r in records] == list(
        range(len(records))
    )  # nothing lost in between, no duplicate
    log.append({"key": f"k:{len(records)}", "i": len(records)})  # and the run can go on
    assert len(log.read()) == len(records) + 1


def test_a_long_lived_log_sees_other_writers_replacements_and_truncation(tmp_path):
    path = tmp_path / "results.jsonl"
    mine, other = ResultsLog(path), ResultsLog(path)
    mine.append({"key": "a"})
    other.append({"key": "b"})  # another writer: `mine` parsed only "a" so far
    assert [r["key"] for r in mine.read()] == ["a", "b"]
    with pytest.raises(DuplicateRecordError):
        mine.append({"key": "b"})
    # the file replaced by another one (e.g. archived and started over)
    replacement = tmp_path / "new.jsonl"
    replacement.write_text('{"key": "x"}\n')
    os.replace(replacement, path)
    assert [r["key"] for r in mine.read()] == ["x"]
    mine.append({"key": "a"})  # "a" belonged to the old file
    # cut back by hand to its first line
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"\n") + 1])
    assert [r["key"] for r in mine.read()] == ["x"]


def test_a_line_rewritten_in_place_at_the_same_size_is_parsed_again(tmp_path):
    path = tmp_path / "results.jsonl"
    log = ResultsLog(path)
    log.append({"key": "a", "v": 1})
    assert log.read()[0]["v"] == 1
    time.sleep(0.01)
    path.write_text(path.read_text().replace('"v": 1', '"v": 2'))
    os.utime(
        path, ns=(time.time_ns(), time.time_ns() + 1_000_000)
    )  # a coarse clock would hide the edit
    assert log.read()[0]["v"] == 2


def test_a_corrupt_appended_line_names_its_line_number_after_incremental_reads(tmp_path):
    path = tmp_path / "results.jsonl"
    log = ResultsLog(path)
    log.append({"key": "a"})
    log.append({"key": "b"})
    with open(path, "a", encoding="utf-8") as f:
        f.write("not json\n")
    with pytest.raises(RecordFormatError) as err:
        log.read()
    assert err.value.line == 3
