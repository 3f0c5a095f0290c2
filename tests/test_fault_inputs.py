"""Bad input to the parsers and loaders: a clear error or a skipped value, never a traceback.
Expected values written by hand."""

from __future__ import annotations

import pytest

from bot import source_text
from bot.config.discovery import load_op_config
from bot.errors import ConfigError
from bot.measure.backends.msprof import parse_opbasicinfo, summarize_launches
from bot.record.errors import RecordFormatError
from bot.record.opt_log import Conclusion, LogRow, OptLog, parse_opt_log, render_opt_log
from bot.run_guard import GuardedLog

HEADER = (
    "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Current Freq,Rated Freq\n"
)


@pytest.mark.parametrize(
    "cell", ["inf", "-inf", "nan", "NaN", "1e999", "-5", "0", "1" + "0" * 200_000, "12x"]
)
def test_msprof_durations_that_are_not_positive_finite_numbers_are_skipped(cell):
    launches = parse_opbasicinfo(
        HEADER + f"k_0,T,{cell},1,1,0,1800,1800\nk_0,T,4.5,1,1,0,1800,1800\n"
    )
    durations, _, notes, _ = summarize_launches(launches)
    assert durations == [4.5] and "1 launch(es) without a Task Duration" in notes[0]


def test_msprof_huge_fields_and_truncated_rows():
    name = "k" + "x" * 200_000  # over csv's default 131072-character field limit
    text = (
        HEADER + f"{name},T,3.5,1,1,0,1800,1800\nk_0,T,2.25,1,1,0,1800,1800\nk_0,T,12"
    )  # cut mid-row
    launches = parse_opbasicinfo(text)
    assert [l.duration_us for l in launches] == [3.5, 2.25, None]
    assert launches[0].op_name == name


def _log() -> str:
    return render_opt_log(
        OptLog(
            op="x",
            baseline_us=10.0,
            baseline_source="x.py",
            rows=[LogRow(1, "a b", 5.0, 50.0, "pass")],
            conclusion=Conclusion("x.py", 1, 5.0, 50.0, "迭代上限"),
        )
    )


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ("| 1 |", "| ² |", "is not a whole number"),
        ("| 1 |", "| " + "9" * 5000 + " |", "is not a whole number"),
        ("5.00 |", "9" * 400 + " |", "is not a latency"),
        ("(iter 1)", "(iter " + "9" * 5000 + ")", "is not '<file> (iter N)'"),
    ],
)
def test_opt_log_bad_numbers_are_record_errors(old, new, problem):
    with pytest.raises(RecordFormatError) as err:
        parse_opt_log(_log().replace(old, new))
    assert problem in str(err.value) and len(str(err.value)) < 400


def test_opt_log_rows_without_the_outer_pipes_parse():
    text = _log().replace("| 1 | a b | 5.00 | +50.0% | pass |", "1 | a b | 5.00 | +50.0% | pass")
    assert parse_opt_log(text).rows == [LogRow(1, "a b", 5.0, 50.0, "pass")]


def test_python_sources_are_read_and_written_as_python_does():
    data = "# -*- coding: gbk -*-\n# 算子\nX = '中'\n".encode("gbk")
    text = source_text.decode(data, "op.py", python=True)
    assert "算子" in text and source_text.encode(text) == data
    with pytest.raises(source_text.UndecodableFile, match="coding line"):
        source_text.decode("# 算子\n".encode("gbk"), "op.py", python=True)
    with pytest.raises(source_text.UndecodableFile, match="UTF-8"):
        source_text.decode(b"\xff\xfe", "notes.md")


@pytest.mark.parametrize(
    "yaml_text, key",
    [
        ("limits:\n  memory_mb: 10\n", "limits.memory_mb"),
        ("limits:\n  filesystem: none\n", "limits.filesystem"),
        ("limits:\n  cpu_s: -1\n", "limits.cpu_s"),
        ("accuracy:\n  repeats: 50\n", "accuracy.repeats"),
    ],
)
def test_bad_limits_name_the_key(tmp_path, yaml_text, key):
    folder = tmp_path / "examples/p/o"
    folder.mkdir(parents=True)
    (folder / "tune.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as err:
        load_op_config(tmp_path, folder)
    assert err.value.key == key and err.value.exit_code == 2


def test_guarded_log_puts_back_what_was_deleted_or_edited(tmp_path):
    notes: list[str] = []
    log = GuardedLog(tmp_path / "results.jsonl", notes.append)
    log.append({"key": "start", "kind": "start"})
    log.append({"key": "baseline", "kind": "baseline"})
    log.path.unlink()
    assert [r["key"] for r in log.read()] == ["start", "baseline"] and "was deleted" in notes[-1]
    log.path.write_text('{"key": "forged"}\n')
    log.append({"key": "iter:1", "kind": "iteration"})
    assert [r["key"] for r in log.read()] == ["start", "baseline", "iter:1"] and "changed" in notes[
        -1
    ]
    assert log.verify() is None


# Coding-line forms as they appear in public Python files (seen with the code search: an upper-case
# name, a shebang first, Emacs and vim styles); the bodies here are ours.
@pytest.mark.parametrize(
    "head",
    [
        "# -*- coding: GBK -*-\n",
        "#!/usr/bin/env python\n# -*- coding: gbk -*-\n",
        "# coding=gb2312\n",
        "# vim: set fileencoding=gbk :\n",
    ],
)
def test_coding_line_forms_round_trip(head):
    body = "# 计算\nNAME = '算子'\n"
    encoding = "gb2312" if "gb2312" in head else "gbk"
    data = (head + body).encode(encoding)
    text = source_text.decode(data, "op.py", python=True)
    assert text == head + body and source_text.encode(text) == data
    ns: dict = {}
    exec(compile(data, "op.py", "exec"), ns)  # Python reads the same bytes the same way
    assert ns["NAME"] == "算子"


@pytest.mark.parametrize(
    "text",
    [
        "git read-tree failed: fatal: sha1 file 'x.lock' write error. Out of diskspace",
        "error: unable to write file: No space left on device",
        "fatal: Disk quota exceeded",
    ],
)
def test_git_words_for_a_full_disk_are_recognised(text):
    from bot import diskfull
    from bot.errors import GitError

    assert diskfull.is_disk_full(GitError(text)) and not diskfull.is_disk_full(
        GitError("fatal: bad object")
    )
