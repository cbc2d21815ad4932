"""The hugetlb test fixture gives back, on the next run, the pages a killed run left reserved
(tests/hugetlb_pool.py), on a pool file of its own so that no real pages are touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hugetlb_pool import Pool

TESTS = Path(__file__).resolve().parent


def pool(tmp_path, pages: int = 10) -> Pool:
    (tmp_path / "nr_hugepages").write_text(str(pages))
    return Pool(tmp_path / "nr_hugepages", tmp_path / "markers")


def test_a_reservation_is_given_back_on_exit(tmp_path):
    p = pool(tmp_path)
    with p.reserved(4) as added:
        assert added == 4 and p.read() == 14
        assert len(list((tmp_path / "markers").glob("*.json"))) == 1
    assert p.read() == 10 and not list((tmp_path / "markers").glob("*.json"))


def test_a_killed_run_leaves_a_marker_that_the_next_run_uses_to_restore_the_pool(tmp_path):
    p = pool(tmp_path)
    code = (f"import sys, time; sys.path.insert(0, {str(TESTS)!r}); from hugetlb_pool import Pool\n"
            f"p = Pool({str(tmp_path / 'nr_hugepages')!r}, {str(tmp_path / 'markers')!r})\n"
            "held = p.reserved(4); held.__enter__(); print('held', flush=True); time.sleep(120)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        assert p.read() == 14
        assert p.restore_abandoned() == 0  # alive: its reservation stands
        child.kill()  # SIGKILL: no finally block runs, as when CI kills a test run
        child.wait()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert p.read() == 14  # what a killed run leaves
    assert p.restore_abandoned() == 4
    assert p.read() == 10 and not list((tmp_path / "markers").glob("*.json"))


def test_concurrent_reservations_do_not_undo_each_other(tmp_path):
    p = pool(tmp_path)
    with p.reserved(4):
        with Pool(tmp_path / "nr_hugepages", tmp_path / "markers").reserved(2):
            assert p.read() == 16
        assert p.read() == 14
    assert p.read() == 10


def test_a_marker_of_another_boot_is_dropped_without_touching_the_pool(tmp_path):
    p = pool(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir(mode=0o700)
    (markers / "1-1.json").write_text(json.dumps({"pool": str(tmp_path / "nr_hugepages"), "added": 4,
                                                  "pid": 1, "start": "1", "boot": "another boot"}))
    assert p.restore_abandoned() == 0
    assert p.read() == 10 and not list(markers.glob("*.json"))


def test_a_marker_directory_others_may_write_to_is_not_trusted(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    os.chmod(markers, 0o777)
    p = Pool(tmp_path / "nr_hugepages", markers)
    (tmp_path / "nr_hugepages").write_text("10")
    (markers / "9-9.json").write_text(json.dumps({"pool": str(tmp_path / "nr_hugepages"), "added": 10,
                                                 "pid": 999999999, "start": "x", "boot": ""}))
    assert p.restore_abandoned() == 0 and p.read() == 10
