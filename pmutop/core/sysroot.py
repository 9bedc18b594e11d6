"""The file-system root that all hardware facts are read from (`--sysroot`, like `lscpu --sysroot`).

Reads may follow symlinks (a captured sysfs is full of them). Everything pmutop writes under the root
(settings, MSR devices, its run state) is opened one path component at a time with O_NOFOLLOW, so a
symlink planted in an untrusted sysroot can never redirect a write as root to another file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

REGULAR = "regular file"
CHAR_DEVICE = "character device"
_KIND_TEST = {REGULAR: stat.S_ISREG, CHAR_DEVICE: stat.S_ISCHR}


class UnsafePathError(OSError):
    """A path under the sysroot is a symlink or not the kind of file expected: nothing was written."""


class Sysroot:
    """Resolves paths such as "proc/sys/kernel/nmi_watchdog" under a root directory."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        # Only the real root describes the CPUs this process runs on (pinning, rdpmc, the shim).
        self.is_host = self.root.resolve() == Path("/")

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read_text(self, rel: str) -> str | None:
        """The stripped content of a file, or None when it is missing or unreadable."""
        try:
            return self.path(rel).read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def open_dir(self, rel: str, *, create: bool = False, mode: int = 0o755) -> int:
        """A directory fd for `rel`, reached without following any symlink (created with `mode` if asked)."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in _parts(rel):
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, mode, dir_fd=fd)
                        os.chmod(part, mode, dir_fd=fd, follow_symlinks=False)  # whatever the umask says
                    except FileExistsError:
                        pass  # another pmutop made it meanwhile
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafePathError(
                            e.errno, f"{self.path(rel)}: {part!r} is a symlink or not a directory"
                        ) from None
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_nofollow(self, rel: str, flags: int, kinds: Iterable[str]) -> int:
        """Open an existing file under the root for writing (or reading) without following symlinks.

        Refuses (UnsafePathError) when any component is a symlink or the file is not one of `kinds`.
        """
        parent, _, name = rel.strip("/").rpartition("/")
        dfd = self.open_dir(parent)
        try:
            try:
                fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=dfd)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise UnsafePathError(
                        e.errno, f"{self.path(rel)} is a symlink; refusing to write through it"
                    ) from None
                raise
        finally:
            os.close(dfd)
        mode = os.fstat(fd).st_mode
        kinds = tuple(kinds)
        if not any(_KIND_TEST[k](mode) for k in kinds):
            os.close(fd)
            raise UnsafePathError(errno.EINVAL, f"{self.path(rel)} is not a {' or '.join(kinds)}")
        return fd

    def write_text(self, rel: str, text: str) -> None:
        """Write a sysfs/procfs setting; raises OSError like the kernel does (EINVAL, EACCES...).

        The file must already exist and be a regular file: settings are never created, and a symlink
        (or a FIFO, a device) planted in a sysroot is refused.
        """
        fd = self.open_nofollow(rel, os.O_WRONLY | os.O_TRUNC, [REGULAR])
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def __str__(self) -> str:
        return str(self.root)


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.strip("/").split("/") if p and p != "."]
    if ".." in parts:
        raise UnsafePathError(errno.EINVAL, f"{rel}: '..' is not allowed")
    return parts
