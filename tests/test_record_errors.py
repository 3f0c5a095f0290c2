"""Record errors are user-facing: they name the file, the line and the fix."""

from __future__ import annotations

from bot.errors import TunebotError
from bot.record.errors import RecordFormatError
from bot.run.errors import DuplicateRecordError


def test_format_error_names_file_line_problem_and_fix_and_exits_2():
    err = RecordFormatError(
        "perf_opt/opt_log.md", 12, "精度 'ok' is not valid", "use one of: pass, fail"
    )
    assert isinstance(err, TunebotError) and err.exit_code == 2
    assert str(err) == "perf_opt/opt_log.md:12: 精度 'ok' is not valid. Fix: use one of: pass, fail"


def test_format_error_without_line():
    assert (
        str(RecordFormatError("x.md", None, "title missing", "add it"))
        == "x.md: title missing. Fix: add it"
    )


def test_duplicate_error_names_key_and_remedy():
    err = DuplicateRecordError("results.jsonl", "iter:3")
    assert isinstance(err, TunebotError)
    assert "iter:3" in str(err) and "has('iter:3')" in str(err) and "--restart" in str(err)
