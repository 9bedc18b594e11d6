"""The file-system root that all hardware facts are read from (`--sysroot`, like `lscpu --sysroot`)."""

from __future__ import annotations

import os
from pathlib import Path


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
        except OSError:
            return None

    def write_text(self, rel: str, text: str) -> None:
        """Write a sysfs/procfs setting; raises OSError like the kernel does (EINVAL, EACCES...)."""
        with open(self.path(rel), "w") as f:
            f.write(text)

    def __str__(self) -> str:
        return str(self.root)
