"""Issue 20, item 12: a recording that could not be written whole ends the run with status 1 and one line
naming --record and the file (a full disk mid-run, or /dev/full from the start), in batch and live modes."""

from __future__ import annotations

import errno
import io
import sys
from pathlib import Path

import pytest
from helpers.flags import needs_tmux
from helpers.serve import ROOT

import pmutop.sinks.recorder as recorder_module
from pmutop.app.main import main

pytestmark = pytest.mark.integration  # starts processes, terminals or servers

DEMO = ("--demo", "--batch", "--interval", "0.05", "--sim-cpus", "2", "--format", "json")


class FillingDisk(io.RawIOBase):
    """A file on a disk with `room` bytes left: the write that does not fit fails with ENOSPC."""

    def __init__(self, path: str, room: int) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.room = room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[no-untyped-def,override]
        if len(data) > self.room:
            self._file.write(bytes(data[: self.room]))  # what fitted stays, as on a real disk
            self._file.flush()
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        self._file.write(bytes(data))
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


@pytest.fixture
def disk_with_room(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The recorder's files land on a disk that fills after `room` bytes."""

    def use(room: int) -> None:
        def fake_open(path: str, mode: str = "r") -> io.BufferedWriter:
            assert mode == "wb"
            return io.BufferedWriter(FillingDisk(path, room))

        monkeypatch.setattr(recorder_module, "open", fake_open, raising=False)

    return use


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_record_to_dev_full_names_the_recording_not_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, *DEMO, "--count", "3", "--record", "/dev/full")
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("pmutop: --record /dev/full: ") and "No space left on device" in last
    assert "cannot write the output" not in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_a_disk_filling_mid_batch_stops_the_run_with_status_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, disk_with_room, name: str
) -> None:
    disk_with_room(6000)  # the header and a few intervals fit
    path = tmp_path / name
    code, out, err = run(capsys, *DEMO, "--count", "400", "--record", str(path))
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"pmutop: --record {path}: No space left on device"), err
    assert "incomplete" in last and "warning" not in last
    assert len(out.splitlines()) < 400 * 2  # the run stopped when the recording did
    assert "Traceback" not in err


def test_a_recording_written_whole_still_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _out, err = run(capsys, *DEMO, "--count", "3", "--record", str(tmp_path / "r.jsonl.gz"))
    assert code == 0, err


@needs_tmux
@pytest.mark.parametrize("room", [None, 20000])
def test_a_disk_filling_in_the_live_view_ends_it_with_status_1(tmp_path: Path, room: int | None) -> None:
    """None: --record /dev/full; a number: a disk with that many bytes left (the recorder's open patched)."""
    from test_tmux import Tmux, wait_exit

    status = tmp_path / "status"
    path = "/dev/full" if room is None else str(tmp_path / "r.jsonl")
    patch = (
        ""
        if room is None
        else "import sys, io; sys.path.insert(0, 'tests'); import pmutop.sinks.recorder as r; "
        "from test_issue20_record_full_disk import FillingDisk; "
        f"r.open = lambda p, m='r': io.BufferedWriter(FillingDisk(p, {room})); "
    )
    script = f"{patch}from pmutop.__main__ import entry; sys.argv[0] = 'pmutop'; sys.exit(entry())"
    cmd = (
        f'cd {ROOT} && XDG_CONFIG_HOME={tmp_path / "config"} {sys.executable} -c "import sys; {script}" '
        f"--demo --sim-cpus 4 --interval 0.1 --record {path}; echo $? > {status}; sleep 60"
    )
    tmux = Tmux(tmp_path)
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "150", "-y", "30", cmd)
        assert wait_exit(status) == 1
        screen = tmux.screen()
        assert f"pmutop: --record {path}: No space left on device" in screen, screen
        assert "Traceback" not in screen and "cannot write the output" not in screen
    finally:
        tmux.kill()
