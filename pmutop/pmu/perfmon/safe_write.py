"""Writing the downloaded tables: never through a symbolic link, each file replaced atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from pathlib import Path, PurePosixPath

from pmutop.core.errors import PmutopError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Writer:
    """Writes files under one destination directory without ever following a symbolic link.

    Directories are walked with O_NOFOLLOW relative to their parent's descriptor, so a link planted
    anywhere in the path (by another user of a shared cache, say) is refused, not written through.
    Files go to a fresh O_EXCL temporary name, are fsynced and renamed over the old one: readers see
    the old file or the new one, never half of one. Created directories are 0755 and files 0644 whatever
    the umask (the tables are public data other users may read).
    """

    def __init__(self, dest: Path) -> None:
        self.dest = dest

    def _refuse_link(self, path: Path) -> PmutopError:
        return PmutopError(
            f"cannot write into {path}: it is a symbolic link (pmutop does not follow links where it writes; "
            "remove it or pick another --perfmon-dir)"
        )

    def preflight(self, rels: list[PurePosixPath]) -> None:
        """Refuse before anything is written when the destination or a directory inside it is a link."""
        paths = [self.dest] + [self.dest.joinpath(*rel.parts[:i]) for rel in rels for i in range(1, len(rel.parts))]
        for path in dict.fromkeys(paths):
            if path.is_symlink():
                raise self._refuse_link(path)
            if path.exists() and not path.is_dir():
                raise PmutopError(f"cannot write into {path}: not a directory")

    def _mkdir_open(self, parent_fd: int | None, path: Path, name: str) -> int:
        """Open directory `name` (under parent_fd, or the absolute `path`), creating it 0755 if missing."""
        created = False
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
            created = True
        except FileExistsError:
            pass
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise self._refuse_link(path) from None
            if e.errno == errno.ENOTDIR:
                raise PmutopError(f"cannot write into {path}: not a directory") from None
            raise
        if created:
            os.fchmod(fd, 0o755)  # the umask narrowed mkdir's mode
        return fd

    def _open_dest(self) -> int:
        """The destination directory's descriptor; missing parents above it are created (0755) as well."""
        missing = []
        path = self.dest
        while not os.path.lexists(path) and path != path.parent:
            missing.append(path)
            path = path.parent
        for p in reversed(missing[1:]):  # parents above dest: ordinary directories, not checked for links
            try:
                os.mkdir(p, 0o755)
                os.chmod(p, 0o755)
            except FileExistsError:
                pass
        return self._mkdir_open(None, self.dest, str(self.dest))

    def write_all(self, blobs: list[tuple[PurePosixPath, bytes]]) -> list[Path]:
        self.preflight([rel for rel, _ in blobs])
        written: list[Path] = []
        try:
            dest_fd = self._open_dest()
        except OSError as e:
            raise PmutopError(f"cannot write into {self.dest}: {e.strerror or e}") from None
        try:
            for rel, data in blobs:
                path = self.dest.joinpath(*rel.parts)
                try:
                    self._write_one(dest_fd, rel, data)
                except OSError as e:
                    raise PmutopError(f"cannot write {path}: {e.strerror or e}") from None
                written.append(path)
        finally:
            os.close(dest_fd)
        return written

    def _write_one(self, dest_fd: int, rel: PurePosixPath, data: bytes) -> None:
        fds: list[int] = []
        try:
            dir_fd, path = dest_fd, self.dest
            for part in rel.parts[:-1]:
                path = path / part
                dir_fd = self._mkdir_open(dir_fd, path, part)
                fds.append(dir_fd)
            _write_atomic(dir_fd, rel.parts[-1], data)
        finally:
            for fd in fds:
                os.close(fd)


def _write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Write `name` in the directory dir_fd via an O_EXCL temporary file, fsync, and rename over it."""
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, 0o644)  # whatever the umask: the tables are public data other users may read
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # replaces a link at `name`, never follows it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)  # the rename itself survives a crash
