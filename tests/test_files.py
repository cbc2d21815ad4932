"""Files written in directories others may write to: no symlink followed, no name outside --out,
no FIFO opened, stale temporaries cleaned (memlab/files.py and its users)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from memlab import files
from memlab.dataset import Dataset, DatasetWriter
from memlab.report import write_report

ROW = {"family": "f", "n": 1, "t": 2.0, "t_min": 1.9, "t_samples": [1.9, 2.0]}


def plant_old_style_links(path, victim):
    """What an attacker did to memlab before: a symlink at `<target>.tmp<pid>` for our pid."""
    os.symlink(victim, f"{path}.tmp{os.getpid()}")


def test_atomic_write_does_not_follow_a_symlink_planted_at_a_temporary_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    target = tmp_path / "c.csv"
    plant_old_style_links(target, victim)
    files.atomic_write(target, "family,n\nf,1\n")
    assert victim.read_text() == "secret\n"
    assert target.read_text() == "family,n\nf,1\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(files.TEMPORARY_SUFFIX)]


def test_temporary_names_are_unpredictable_and_exclusive(tmp_path, monkeypatch):
    names = []
    real = os.replace

    def spy(source, destination):
        names.append(os.path.basename(source))
        real(source, destination)

    monkeypatch.setattr(os, "replace", spy)
    for _ in range(3):
        files.atomic_write(tmp_path / "x.csv", "a\n")
    assert len(set(names)) == 3, names
    assert all(name.startswith(f".x.csv.{os.getpid()}.") for name in names)


def test_dataset_save_and_report_never_write_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    for name in ("d.csv", "d.json", "r.html"):
        plant_old_style_links(tmp_path / name, victim)
    Dataset([ROW], {"family": "f", "param_names": ["n"]}).save(tmp_path / "d.csv")
    write_report([Dataset.load(tmp_path / "d.csv")], tmp_path / "r.html", command="memlab report")
    assert victim.read_text() == "secret\n"


@pytest.mark.parametrize("write", ["save", "writer", "report", "atomic"])
def test_a_symlink_at_the_target_is_refused_not_written_through(tmp_path, write):
    victim = tmp_path / "victim.csv"
    Dataset([ROW], {"family": "f", "param_names": ["n"]}).save(victim)
    before = victim.read_bytes()
    target = tmp_path / ("link.html" if write == "report" else "link.csv")
    target.symlink_to(victim)
    with pytest.raises(files.OutputError, match="symbolic link"):
        if write == "save":
            Dataset([ROW], {"family": "f"}).save(target)
        elif write == "writer":
            DatasetWriter(target, {"family": "f", "param_names": ["n"]})
        elif write == "report":
            write_report([], target, command="memlab report")
        else:
            files.atomic_write(target, "x")
    assert victim.read_bytes() == before
    assert target.is_symlink()


def test_open_append_refuses_a_link_swapped_in_after_the_check(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    (tmp_path / "x.csv").symlink_to(victim)
    with pytest.raises(files.OutputError, match="symbolic link"):
        files.open_append(tmp_path / "x.csv")
    assert victim.read_text() == "secret\n"


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_fifo_directory_and_device_outputs_are_refused_without_opening_them(tmp_path, kind):
    target = tmp_path / "out.csv"
    if kind == "fifo":
        os.mkfifo(target)
        expected = "FIFO"
    elif kind == "directory":
        target.mkdir()
        expected = "a directory"
    else:
        try:
            os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a /dev/null of our own
        except PermissionError:
            pytest.skip("creating a device node needs root (CAP_MKNOD)")
        expected = "a device"
    with pytest.raises(files.OutputError, match=expected):
        files.check_output_file(target, "--out")
    with pytest.raises(ValueError, match=expected):
        DatasetWriter(target, {"family": "f"})  # would block forever on a FIFO before


def test_a_fifo_dataset_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "x.csv")
    with pytest.raises(ValueError, match="FIFO"):
        Dataset.load(tmp_path / "x.csv")


def test_a_directory_that_takes_no_file_is_refused_before_writing():
    with pytest.raises(files.OutputError, match="takes no new file"):
        files.check_output_file("/proc/memlab-report.html", "--out")
    with pytest.raises(files.OutputError, match="cannot be created|takes no new file"):
        files.check_output_directory("/proc/memlab-tour", "--out")


def test_an_output_directory_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(files.OutputError, match="is a file, not a directory"):
        files.check_output_directory(tmp_path / "f")


def test_an_output_in_a_new_directory_makes_it_and_names_a_bad_one(tmp_path):
    made = files.check_output_file_in_new_directory(tmp_path / "a" / "b" / "r.csv", "--out")
    assert made.parent.is_dir() and not made.exists()
    (tmp_path / "f").write_text("x")
    with pytest.raises(files.OutputError, match=r"^--out's directory .*/f is a file, not a directory"):
        files.check_output_file_in_new_directory(tmp_path / "f" / "r.csv", "--out", "--out's directory")
    with pytest.raises(files.OutputError, match=r"^--out .*/f is a file, not a directory"):
        files.check_output_file_in_new_directory(tmp_path / "f" / "r.csv", "--out")


def test_written_files_get_the_umask_mode_or_keep_the_targets(tmp_path):
    files.atomic_write(tmp_path / "new", "x")
    expected = 0o666 & ~files._umask()
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == expected
    os.chmod(tmp_path / "new", 0o640)
    files.atomic_write(tmp_path / "new", "y")
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o640


def test_names_from_scripts_stay_inside_the_folder(tmp_path):
    assert files.inside(tmp_path, "chase-quick.csv") == tmp_path / "chase-quick.csv"
    for bad in ("x/../../escaped/pwn.csv", "../up.csv", "..", ".", ".hidden", "a\x00b", ""):
        with pytest.raises(ValueError, match="plain file name"):
            files.inside(tmp_path, bad)


# ---- stale temporaries ------------------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporaries_of_a_killed_writer_are_removed_when_the_dataset_is_resumed(tmp_path):
    path = tmp_path / "d.csv"
    with DatasetWriter(path, {"family": "f", "param_names": ["n"]}) as writer:
        writer.append(ROW)
    pid = dead_pid()
    stale = [tmp_path / f".d.csv.{pid}.abc123{files.TEMPORARY_SUFFIX}", tmp_path / f"d.csv.tmp{pid}",
             tmp_path / f".d.json.{pid}.zz9{files.TEMPORARY_SUFFIX}"]
    for leftover in stale:
        leftover.write_text("x" * 1000)
    alive = tmp_path / f".d.csv.{os.getpid()}.live{files.TEMPORARY_SUFFIX}"
    alive.write_text("being written")
    other = tmp_path / f".other.csv.{pid}.abc{files.TEMPORARY_SUFFIX}"
    other.write_text("not ours to judge")
    with DatasetWriter(path, {"family": "f", "param_names": ["n"]}) as writer:
        assert len(writer.existing_rows) == 1
    assert not any(p.exists() for p in stale)
    assert alive.exists() and other.exists()


def test_a_killed_rewrite_leaves_a_temporary_that_the_next_run_removes(tmp_path):
    """SIGKILL in the middle of atomic_write: the target is intact, the temporary goes on resume."""
    path = tmp_path / "d.csv"
    Dataset([ROW], {"family": "f", "param_names": ["n"]}).save(path)
    code = f"""
import os, sys, time
from memlab import files
real = os.replace
def stall(source, destination):
    print("written", flush=True)
    time.sleep(60)
os.replace = stall
files.atomic_write({str(path)!r}, "family,n\\n" + "f,2\\n" * 100000)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
        child.kill()
    finally:
        child.wait()
        child.stdout.close()
    left = [p for p in tmp_path.iterdir() if p.name.endswith(files.TEMPORARY_SUFFIX)]
    assert len(left) == 1 and left[0].stat().st_size > 100000
    assert Dataset.load(path).rows == [ROW]
    DatasetWriter(path, {"family": "f", "param_names": ["n"]}).close()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(files.TEMPORARY_SUFFIX)]


def test_fsync_happens_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    files.atomic_write(tmp_path / "x", "data")
    assert calls[:2] == ["fsync", "replace"]
    assert calls[-1] == "fsync"  # the directory, after the rename


def test_remove_stale_temporaries_ignores_unrelated_names(tmp_path):
    (tmp_path / "d.csv.tmpX").write_text("")
    (tmp_path / "notes.tmp1").write_text("")
    assert files.remove_stale_temporaries(tmp_path / "d.csv") == []
    assert (tmp_path / "d.csv.tmpX").exists() and (tmp_path / "notes.tmp1").exists()


# ---- links among the path's directories (issue 27) ------------------------------------------


@pytest.fixture
def linked(tmp_path):
    """DIR/etclink -> DIR/elsewhere, a directory someone else chose (root once wrote /etc/x.csv
    through such a link); returns (DIR, the directory the link points to)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "etclink").symlink_to(elsewhere)
    return tmp_path / "dir", elsewhere


@pytest.mark.parametrize("write", ["check_file", "check_directory", "new_directory", "atomic", "append",
                                   "save", "writer", "report"])
def test_a_link_among_the_directories_is_refused_not_followed(linked, write):
    top, elsewhere = linked
    target = top / "etclink" / "x.csv"
    (elsewhere / "x.csv").write_text("family,n\nf,1\n")  # for open_append, an existing file
    before = sorted(p.name for p in elsewhere.iterdir())
    with pytest.raises(files.OutputError, match=rf"{top}/etclink is a symbolic link \(to {elsewhere}\); "
                                                "memlab does not write through links"):
        if write == "check_file":
            files.check_output_file(target, "--out")
        elif write == "check_directory":
            files.check_output_directory(top / "etclink" / "results", "--out")
        elif write == "new_directory":
            files.check_output_file_in_new_directory(top / "etclink" / "new" / "x.csv", "--out")
        elif write == "atomic":
            files.atomic_write(target, "x")
        elif write == "append":
            files.open_append(target)
        elif write == "save":
            Dataset([ROW], {"family": "f"}).save(top / "etclink" / "d.csv")
        elif write == "writer":
            DatasetWriter(top / "etclink" / "d.csv", {"family": "f", "param_names": ["n"]})
        else:
            write_report([], top / "etclink" / "r.html", command="memlab report")
    assert sorted(p.name for p in elsewhere.iterdir()) == before
    assert (elsewhere / "x.csv").read_text() == "family,n\nf,1\n"


def test_a_linked_output_directory_is_refused(linked):
    top, elsewhere = linked
    with pytest.raises(files.OutputError, match=r"--out .*/etclink is a symbolic link"):
        files.check_output_directory(top / "etclink", "--out")
    with pytest.raises(files.OutputError, match=r"symbolic link"):  # a dotted path through the link
        files.check_output_file(top / "etclink" / ".." / "dir" / "x.csv", "--out")
    assert not list(elsewhere.iterdir())


def test_a_path_through_real_directories_is_accepted(tmp_path, monkeypatch):
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    files.atomic_write(os.path.join("b", "..", "b", "x.csv"), "1\n")  # relative, with '..'
    assert (tmp_path / "a" / "b" / "x.csv").read_text() == "1\n"
    assert files.check_output_directory("b/c/", "--out") == files.Path("b/c")


@pytest.mark.parametrize("argv", [
    lambda top: ["sweep", "calibrate.quick", "--no-progress", "--out", f"{top}/etclink/x.csv"],
    lambda top: ["sweep", "calibrate.quick", "--no-progress", "--out", f"{top}/etclink/"],
    lambda top: ["run", "calibrate", "--repeat", "1", "--out", f"{top}/etclink/x.csv"],
    lambda top: ["tour", "--family", "calibrate", "--reduced", "--no-progress", "--out", f"{top}/etclink"],
    lambda top: ["reproduce", "table6.1", "--quick", "--no-progress", "--out", f"{top}/etclink/r"],
], ids=["sweep-file", "sweep-folder", "run", "tour", "reproduce"])
def test_the_command_line_refuses_a_linked_out_in_one_line_exit_2(linked, argv, capsys):
    from memlab import cli

    top, elsewhere = linked
    assert cli.main(argv(top)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "symbolic link" in err, err
    assert not list(elsewhere.iterdir())
