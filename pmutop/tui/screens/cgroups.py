"""The cgroup view (key 5): the counted cgroups as a tree, indented by depth; a parent counts its children
(the kernel's cgroup counters are hierarchical) and both are shown. Siblings follow the sort; Enter opens a
cgroup's path and history."""

from __future__ import annotations

from rich.text import Text

from pmutop.core.task_reading import CgroupReading, TaskSnapshot
from pmutop.tui.screens.processes import ReadingDetailScreen
from pmutop.tui.screens.task_list import Row, TaskListScreen
from pmutop.tui.task_columns import CGROUP_COLUMNS, Reading


def tree(cgroups: tuple[CgroupReading, ...]) -> dict[str | None, list[CgroupReading]]:
    """Children by parent path: a cgroup's parent is its nearest counted ancestor (None: a top of the tree)."""
    paths = {c.path for c in cgroups}
    children: dict[str | None, list[CgroupReading]] = {}
    for c in cgroups:
        parent = c.parent
        while parent is not None and parent not in paths:
            parent = CgroupReading(parent, "", 0.0, {}, 0.0).parent
        children.setdefault(parent, []).append(c)
    return children


class CgroupsScreen(TaskListScreen):
    KIND = "cgroups"
    TITLE_TEXT = "Cgroups"
    COLUMNS = CGROUP_COLUMNS
    FIXED = frozenset({"name"})
    EMPTY = "no cgroups in the latest interval (cgroups are counted with --cgroups or --cgroup PATH)"
    PLACEHOLDER = "filter: cgroup~docker  comm~nginx  ipc<1  cpu>50 (Enter: apply, Esc: close, \\: clear)"

    def rows(self, snapshot: TaskSnapshot) -> list[Row]:
        children = tree(snapshot.cgroups)
        out: list[Row] = []

        def walk(parent: str | None, depth: int) -> None:
            for c in self.sort_rows([(c.path, c, depth) for c in children.get(parent, [])]):
                out.append(c)
                walk(c[0], depth + 1)

        walk(None, 0)
        return out

    def text_fields(self, r: Reading) -> tuple[dict[str, str], int | None]:
        assert isinstance(r, CgroupReading)
        return {"name": r.name, "cgroup": r.path}, None

    def open_detail(self, key: str) -> None:
        self.app.push_screen(CgroupDetailScreen(key))


class CgroupDetailScreen(ReadingDetailScreen):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def history(self) -> list[Reading]:
        feed = self.tasks.task_feed
        return list(feed.cgroup_history(self.path)) if feed is not None else []

    def heading(self, latest: Reading | None, current: bool) -> Text:
        name = latest.name if isinstance(latest, CgroupReading) else self.path
        title = Text(f"{name}", style="bold")
        title.append(f"   {self.path}", style="cyan")
        if isinstance(latest, CgroupReading):
            title.append(f"   {latest.processes} processes (its children's included)")
        if not current:
            title.append("   not in the latest interval", style="yellow")
        return title
