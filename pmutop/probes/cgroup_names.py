"""Where the cgroup v2 tree is, and cgroups named as users know them: systemd units, docker and containerd
containers by name, Kubernetes pods.

Everything is read under a Sysroot (`--sysroot` tests feed a fake tree); names are looked up once per container
id and cached (a container's name does not change while it runs).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

from pmutop.core.sysroot import Sysroot

# The unified hierarchy: at sys/fs/cgroup on a pure-v2 host, at sys/fs/cgroup/unified in systemd's "hybrid" mode
# (v1 controllers at sys/fs/cgroup/*, the v2 tree beside them: systemd's src/shared/cgroup-setup.c).
CGROUP2_CANDIDATES = ("sys/fs/cgroup", "sys/fs/cgroup/unified")
# Only a cgroup v2 directory has cgroup.controllers (Documentation/admin-guide/cgroup-v2.rst, "Core Interface
# Files": "cgroup.controllers ... exists on all cgroups"); a v1 hierarchy or the hybrid's tmpfs has none.
V2_MARKER = "cgroup.controllers"

_HEX64 = re.compile(r"[0-9a-f]{64}")
# systemd cgroup driver: docker-<id>.scope (moby daemon/cgroups), cri-containerd-<id>.scope (containerd CRI),
# crio-<id>.scope (CRI-O), libpod-<id>.scope (podman); the cgroupfs driver puts the bare id under /docker/.
_SCOPE = re.compile(r"(docker|cri-containerd|crio|libpod)-([0-9a-f]{64})\.scope")
# kubelet's pod cgroups: kubepods-burstable-pod<uid>.slice (systemd driver: the uid's dashes escaped as
# underscores) or pod<uid> (cgroupfs driver) (kubernetes pkg/kubelet/cm/cgroup_manager_linux.go).
_POD = re.compile(r"(?:kubepods(?:-[a-z]+)*-)?pod([0-9a-f_-]{36})(?:\.slice)?")
_RUNTIME_LABEL = {"docker": "docker", "cri-containerd": "containerd", "crio": "cri-o", "libpod": "podman"}
# containerd keeps each running task's OCI bundle here, per containerd namespace ("k8s.io" for Kubernetes,
# "default" for nerdctl): runtime/v2 shim bundle layout.
_CONTAINERD_TASKS = "run/containerd/io.containerd.runtime.v2.task"
# The container name containerd's CRI plugin writes into the OCI spec (containerd
# internal/cri/annotations/annotations.go ContainerName), and nerdctl's (pkg/labels: "nerdctl/name").
_CONTAINER_NAME_ANNOTATIONS = ("io.kubernetes.cri.container-name", "nerdctl/name")


def find_cgroup2(sysroot: Sysroot) -> str | None:
    """The cgroup v2 root relative to the sysroot ("sys/fs/cgroup" or "sys/fs/cgroup/unified"), or None."""
    for rel in CGROUP2_CANDIDATES:
        if sysroot.exists(f"{rel}/{V2_MARKER}"):
            return rel
    return None


def normalise_path(path: str) -> str:
    """A cgroup path as the records show it: relative to the v2 root, with one leading slash ("/" the root)."""
    parts = [p for p in path.strip().split("/") if p and p != "."]
    return "/" + "/".join(parts)


def path_under_root(text: str, root: str) -> str:
    """A --cgroup path normalised (normalise_path); an absolute path under the v2 root `root` (relative to the
    sysroot, e.g. "/sys/fs/cgroup/system.slice" with root "sys/fs/cgroup") is taken relative to it, as users
    copy paths from /sys/fs/cgroup."""
    path, prefix = normalise_path(text), normalise_path(root)
    if text.strip().startswith("/") and prefix != "/" and (path == prefix or path.startswith(prefix + "/")):
        return normalise_path(path[len(prefix) :])
    return path


def walk(sysroot: Sysroot, root: str, top: str = "/") -> Iterator[str]:
    """Every cgroup at or under `top` (normalised paths, parents before children); one that disappears while
    walked is skipped."""
    stack = [normalise_path(top)]
    while stack:
        path = stack.pop()
        yield path
        try:
            with os.scandir(sysroot.path(root + path)) as entries:
                children = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        base = "" if path == "/" else path
        stack.extend(f"{base}/{name}" for name in sorted(children, reverse=True))


class CgroupNamer:
    """`name(path)`: how a user knows the cgroup, e.g. "nginx.service", "docker web", "pod default/api-0"."""

    def __init__(self, sysroot: Sysroot) -> None:
        self.sysroot = sysroot
        self._containers: dict[str, str] = {}  # id -> name ("" when none was readable)
        self._pods: dict[str, str] = {}  # uid -> "namespace/name" ("" when none found)

    def name(self, path: str) -> str:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return "/"
        last = parts[-1]
        scope = _SCOPE.fullmatch(last)
        if scope:
            return self._container(_RUNTIME_LABEL[scope.group(1)], scope.group(2))
        if _HEX64.fullmatch(last) and len(parts) >= 2:
            # cgroupfs driver: /docker/<id>, or a container under a pod: /kubepods/burstable/pod<uid>/<id>
            runtime = "docker" if parts[-2] == "docker" else "container"
            return self._container(runtime, last)
        pod = _POD.fullmatch(last)
        if pod and (last.startswith("pod") or last.startswith("kubepods")):
            return self._pod(pod.group(1).replace("_", "-"))
        return last  # a systemd unit (nginx.service, user@1000.service, session-3.scope) or a plain directory

    def _container(self, runtime: str, container_id: str) -> str:
        if container_id not in self._containers:
            self._containers[container_id] = self._container_name(runtime, container_id)
        name = self._containers[container_id]
        # docker's short id (12 hex digits): what `docker ps` shows, and what docker/ctr accept as the id.
        return f"{runtime} {name or container_id[:12]}"

    def _container_name(self, runtime: str, container_id: str) -> str:
        if runtime == "docker":
            # moby keeps each container's state here; "Name" is "/web" (daemon/container/container.go)
            text = self.sysroot.read_text(f"var/lib/docker/containers/{container_id}/config.v2.json")
            try:
                name = json.loads(text)["Name"] if text else ""
            except (ValueError, KeyError, TypeError):
                return ""
            return str(name).lstrip("/") if isinstance(name, str) else ""
        try:
            namespaces = sorted(os.listdir(self.sysroot.path(_CONTAINERD_TASKS)))
        except OSError:
            return ""
        for ns in namespaces:
            text = self.sysroot.read_text(f"{_CONTAINERD_TASKS}/{ns}/{container_id}/config.json")
            if not text:
                continue
            try:
                annotations = json.loads(text).get("annotations") or {}
            except (ValueError, AttributeError):
                return ""
            for key in _CONTAINER_NAME_ANNOTATIONS:
                if isinstance(annotations.get(key), str) and annotations[key]:
                    return str(annotations[key])
            return ""
        return ""

    def _pod(self, uid: str) -> str:
        if uid not in self._pods:
            self._pods[uid] = self._pod_name(uid)
        return f"pod {self._pods[uid] or uid}"

    def _pod_name(self, uid: str) -> str:
        # kubelet logs each pod under /var/log/pods/<namespace>_<name>_<uid> (pkg/kubelet/kuberuntime/helpers.go
        # BuildPodLogsDirectory); namespaces and pod names cannot contain "_" (DNS labels), so the split is safe.
        try:
            entries = os.listdir(self.sysroot.path("var/log/pods"))
        except OSError:
            return ""
        for entry in entries:
            namespace, _, rest = entry.partition("_")
            name, _, entry_uid = rest.rpartition("_")
            if entry_uid == uid and namespace and name:
                return f"{namespace}/{name}"
        return ""
