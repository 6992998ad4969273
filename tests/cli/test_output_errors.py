"""Outputs that cannot be written are the machine's problem, not the tool's: one line, exit 2."""
import os

import pytest

from dissector.cli import main
from tests.support import CAPTURES


@pytest.mark.parametrize("argv", [
    ["records", "--format", "parquet", "--out", "/dev/full"],
    ["records", "--format", "csv", "--out", "/dev/full"],
    ["export", "--level", "records", "--out", "{tmp}/a-file/dir"],
    ["export", "--out", "{tmp}/a-file"],
])
def test_a_full_disk_or_an_output_that_cannot_be_made_is_a_one_line_error(tmp_path, capsys, argv):
    """A full disk under `records --format parquet` (a 2 MiB tmpfs) ended in `internal error:
    OSError ... please report it` (exit 3), and so did an output directory that cannot be made:
    the machine's, not a bug. Now one line, exit 2 (/dev/full answers every write with ENOSPC).
    (Not among the fuzz tests: pyarrow throws a C++ exception on the failed write, which the
    sanitizers' preloaded runtime cannot intercept.)"""
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is Linux's: this test needs it")
    (tmp_path / "a-file").write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main(argv[:1] + [str(CAPTURES / "codecs.pcap")] + argv[1:])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("kafka-dissect: error: ") and err.count("\n") == 1, err
    assert "internal error" not in err


@pytest.mark.parametrize("argv, message", [
    (["records", "--format", "parquet", "--out", "{tmp}/no-folder/r.parquet"],
     "--out {tmp}/no-folder/r.parquet: No such file or directory"),
    (["export", "--out", "{tmp}/a-file"],
     "--out {tmp}/a-file: a file, not a folder (export writes a Parquet file per table into it)"),
])
def test_an_output_that_cannot_be_made_is_named_before_the_run(tmp_path, capsys, monkeypatch,
                                                              argv, message):
    """Said with the option it came from, and before the capture is read (the dissection is
    never started)."""
    from analysis.commands import export
    from dissector.commands import common
    (tmp_path / "a-file").write_text("")
    for module in (common, export):   # what a run makes first
        monkeypatch.setattr(module, "Progress", None)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv[:1] + [str(CAPTURES / "codecs.pcap")] + argv[1:]) == 2
    assert capsys.readouterr().err == \
        f"kafka-dissect: error: {message.replace('{tmp}', str(tmp_path))}\n"
