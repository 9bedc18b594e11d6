"""Settings the user changes in the live view (sort, columns, interval, view), kept between runs in
$XDG_CONFIG_HOME/pmutop/config.toml (~/.config/pmutop/config.toml). Read with tomllib; a bad file gives
one line and the defaults, never a traceback; saving is best effort."""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

VIEWS = ("table", "topdown", "heatmap", "processes", "cgroups", "memory")  # keys 1-6


@dataclass
class Settings:
    sort: str = "cpu"
    reverse: bool = False
    hidden_columns: list[str] = field(default_factory=list)  # column keys the user turned off (`c`)
    shown_columns: list[str] = field(default_factory=list)  # columns off by default the user turned on (`c`)
    interval: float | None = None  # None: the command line's (or 1 s)
    view: str = "table"
    heatmap_metric: str | None = None


def config_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "pmutop" / "config.toml"


def _check(data: dict[str, object]) -> Settings:
    s = Settings()
    types: dict[str, type | tuple[type, ...]] = {
        "sort": str,
        "reverse": bool,
        "hidden_columns": list,
        "shown_columns": list,
        "interval": (int, float),
        "view": str,
        "heatmap_metric": str,
    }
    for f in fields(Settings):
        if f.name not in data:
            continue
        value = data[f.name]
        if not isinstance(value, types[f.name]) or (f.name == "interval" and isinstance(value, bool)):
            raise ValueError(f"{f.name} has the wrong type")
        if f.name.endswith("_columns") and not all(isinstance(v, str) for v in value):  # type: ignore[attr-defined]
            raise ValueError(f"{f.name} must be a list of column names")
        if f.name == "view" and value not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(VIEWS)}")
        if f.name == "interval" and not 0.01 <= float(value) <= 3600:  # type: ignore[arg-type]
            raise ValueError("interval must be 0.01 .. 3600 s")
        setattr(s, f.name, float(value) if f.name == "interval" else value)  # type: ignore[arg-type]
    return s


def load(path: Path | None = None) -> tuple[Settings, str | None]:
    """The saved settings and, when the file is unusable, the one line to show (then the defaults)."""
    path = path or config_path()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
        return _check(data), None
    except FileNotFoundError:
        return Settings(), None
    except (OSError, tomllib.TOMLDecodeError, ValueError, UnicodeDecodeError) as e:
        text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        why = text.splitlines()[0] if text else type(e).__name__
        return Settings(), f"ignoring {path}: {why}; using the defaults"


def dumps(settings: Settings) -> str:
    lines = ["# pmutop live-view settings (written by pmutop; safe to edit or delete)"]
    for key, value in asdict(settings).items():
        if value is None:
            continue
        # JSON strings, numbers, booleans and lists of strings are valid TOML values.
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def save(settings: Settings, path: Path | None = None) -> str | None:
    """Write atomically; returns the one line to show when it cannot."""
    path = path or config_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".config.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(dumps(settings))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        return f"cannot save settings to {path}: {e.strerror or e}"
    return None
