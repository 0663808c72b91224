"""Host-side access to a directory that untrusted code controls.

The agent owns every entry of its workspace. It may swap a directory for a symlink while the harness
walks it, leave a FIFO, socket or device node where a file was, name files with any bytes (newlines,
invalid UTF-8), nest directories thousands deep or create hundreds of thousands of files. Every
host-side read, write, walk and removal of a workspace goes through this module, which

- walks paths one component at a time from an open directory descriptor with O_NOFOLLOW, so no
  symlink is followed at any component, however the tree changes meanwhile;
- opens files with O_NONBLOCK and checks fstat before using them: a FIFO, socket or device is
  reported as what it is, never opened for reading or writing, never waited on;
- keeps names faithful to their bytes (str with surrogate escapes, as os.fsdecode gives them) and
  offers `display_name` to show them;
- is iterative and bounded: depth, entries and bytes have limits, and what lies beyond them is
  reported, not raised;
- for a worker that is not root (whose uid the agent's commands share), gives the owner back the
  permissions a command took away from what it opens: a `chmod 000` is never the harness's error.

No Django here; the sandbox backends, the trajectory writer and the harness's clean-up share it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
# No O_TRUNC here: the file is truncated only once fstat has shown it is a regular file.
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

# How deep remove_tree keeps directories open before it moves a deeper subtree up to the top
# (a 5,000-deep tree must go without 5,000 open descriptors).
_REMOVE_OPEN_DEPTH = 64

# Defaults for walks of a workspace: generous for research code, small enough to stay quick.
MAX_WALK_DEPTH = 64
MAX_WALK_ENTRIES = 50_000


class UnsafePath(OSError):
    """A path leads through a symlink or a special file, out of the tree, or is not what the caller
    needs (a directory where a file is expected). The message says which component."""


def display_name(name: str) -> str:
    """A path as it can be shown and stored: undecodable bytes as \\xNN, control characters escaped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        text = "".join(repr(char)[1:-1] if ord(char) < 32 or ord(char) == 127 else char for char in text)
    return text


def plain_name(name: str) -> bool:
    """Whether a path can travel in a unified diff header and a JSON document unchanged: valid
    UTF-8, no control characters, no backslash or double quote (which diff tools quote)."""
    return display_name(name) == name and not any(char in name for char in '\\"')


def split_relative(path: str) -> list[str]:
    """The components of a path relative to the tree's root, normalised lexically ("." and ".."
    resolved without looking at the disk, which is right because no link is ever followed).
    Raises UnsafePath for a path that climbs out of the tree or holds a NUL."""
    if "\0" in path:
        raise UnsafePath(errno.EINVAL, f"path {display_name(path)!r} holds a NUL character")
    normal = posixpath.normpath(path.lstrip("/")) if path.strip("/") else "."
    if normal == ".":
        return []
    if normal == ".." or normal.startswith("../"):
        raise UnsafePath(errno.EXDEV, f"path {display_name(path)!r} is outside the directory")
    return normal.split("/")


class FileKind(StrEnum):
    DIR = "dir"
    FILE = "file"
    SYMLINK = "symlink"
    FIFO = "fifo"
    SOCKET = "socket"
    DEVICE = "device"


def kind(info: os.stat_result) -> FileKind:
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return FileKind.DIR
    if stat.S_ISREG(mode):
        return FileKind.FILE
    if stat.S_ISLNK(mode):
        return FileKind.SYMLINK
    if stat.S_ISFIFO(mode):
        return FileKind.FIFO
    if stat.S_ISSOCK(mode):
        return FileKind.SOCKET
    return FileKind.DEVICE


# --- the owner's permissions ---------------------------------------------------------------------
# A worker that is not root is refused by a `chmod 000` like anybody else, and the agent's commands
# run under the worker's own uid: every entry of the workspace is the worker's, so it can give itself
# back what it needs. Whatever the agent does to permissions is then never a harness error. (A root
# worker is refused nothing; nothing is changed for it.)
_DIRECTORY_OWNER_BITS = stat.S_IRWXU
_FILE_OWNER_BITS = stat.S_IRUSR | stat.S_IWUSR


def _reclaims() -> bool:
    return os.geteuid() != 0


def _give_owner_back(parent: int, name: str) -> bool:
    """Gives the owner back read and write (and, on a directory, search) permission on the directory
    or regular file `name` in `parent`, never through a link; whether it did. False for anything
    else, or where the caller is not the owner."""
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return False
    try:
        mode = os.fstat(handle).st_mode
        bits = _DIRECTORY_OWNER_BITS if stat.S_ISDIR(mode) else _FILE_OWNER_BITS if stat.S_ISREG(mode) else 0
        if not bits or mode & bits == bits:
            return False
        os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(mode) | bits)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


def _keep_searchable(fd: int) -> None:
    """A directory the host opened (it could read it) keeps owner write and search permission too, so
    that what is inside can be looked up, created and removed (a non-root worker only)."""
    if not _reclaims():
        return
    try:
        mode = os.fstat(fd).st_mode
        if mode & _DIRECTORY_OWNER_BITS != _DIRECTORY_OWNER_BITS:
            os.fchmod(fd, stat.S_IMODE(mode) | _DIRECTORY_OWNER_BITS)
    except OSError:
        pass  # not the owner: what follows is refused as it would have been


def _open_directory_at(parent: int, name: str, shown: str) -> int:
    try:
        try:
            fd = os.open(name, _DIRECTORY, dir_fd=parent)
        except PermissionError:
            if not (_reclaims() and _give_owner_back(parent, name)):
                raise
            fd = os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            what = _describe_at(parent, name)
            raise UnsafePath(error.errno, f"{display_name(shown)} is {what}, not a directory") from None
        raise
    _keep_searchable(fd)
    return fd


def _open_root(root: str | os.PathLike[str]) -> int:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except PermissionError:
        if not _reclaims():
            raise
        keep_reachable(root, [])
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    _keep_searchable(fd)
    return fd


def _describe_at(parent: int, name: str) -> str:
    try:
        found = kind(os.stat(name, dir_fd=parent, follow_symlinks=False))
    except OSError:
        return "gone"
    return {FileKind.FILE: "a file", FileKind.SYMLINK: "a symlink", FileKind.DIR: "a directory"}.get(found, f"a {found}")


@contextmanager
def open_directory(root: str | os.PathLike[str], parts: list[str], *, create: bool = False,
                   owner: tuple[int, int] | None = None) -> Iterator[int]:
    """A descriptor of root/parts..., reached without following any link below root. With `create`,
    missing directories are made (and given to `owner` (uid, gid) when set)."""
    fd = _open_root(root)
    try:
        for index, name in enumerate(parts):
            shown = "/".join(parts[: index + 1])
            try:
                child = _open_directory_at(fd, name, shown)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                child = _open_directory_at(fd, name, shown)
                if owner is not None:
                    os.fchown(child, *owner)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def keep_reachable(root: str | os.PathLike[str], parts: list[str]) -> None:
    """Gives the owner read, write and search permission back on root and each directory along
    parts, not following links: a command may take them away (`chmod 000 /workspace`), and the next
    one must still start there, or the sandbox would seem broken by what the agent did."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in [None, *parts]:
            if name is not None:
                child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
            mode = os.fstat(fd).st_mode
            if not stat.S_ISDIR(mode):
                return
            if mode & 0o700 != 0o700:
                os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(mode) | 0o700)
    except FileNotFoundError:
        return
    finally:
        os.close(fd)


def lstat(root: str | os.PathLike[str], path: str) -> os.stat_result | None:
    """The entry at path itself (a symlink is described, not followed); None when it does not exist
    or a component on the way is not a plain directory."""
    parts = split_relative(path)
    try:
        if not parts:
            return os.stat(root)
        with open_directory(root, parts[:-1]) as parent:
            return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except (FileNotFoundError, UnsafePath):
        return None


def _open_regular(parent: int, name: str, flags: int, shown: str) -> int:
    try:
        try:
            fd = os.open(name, flags, 0o644, dir_fd=parent)
        except PermissionError:
            if not (_reclaims() and _give_owner_back(parent, name)):
                raise
            fd = os.open(name, flags, 0o644, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):
            raise UnsafePath(error.errno, f"{display_name(shown)} is {_describe_at(parent, name)}, not a regular file") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafePath(errno.EINVAL, f"{display_name(shown)} is a {kind(info)}, not a regular file")
    return fd


def _read_fd(fd: int, limit: int) -> tuple[bytes, bool]:
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    data = b"".join(chunks)
    return data[:limit], len(data) > limit


def read_bytes(root: str | os.PathLike[str], path: str, *, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the regular file at path, and whether it held more. Raises
    UnsafePath for links, special files and directories on the way or at the end, and
    FileNotFoundError when it does not exist."""
    parts = split_relative(path)
    if not parts:
        raise UnsafePath(errno.EISDIR, "the directory itself is not a file")
    with open_directory(root, parts[:-1]) as parent:
        fd = _open_regular(parent, parts[-1], _READ, path)
        try:
            return _read_fd(fd, limit)
        finally:
            os.close(fd)


def write_bytes(root: str | os.PathLike[str], path: str, data: bytes, *, owner: tuple[int, int] | None = None) -> None:
    """Creates or replaces the regular file at path (making missing directories), never through a
    link and never into a special file. Gives new entries to `owner` (uid, gid) when set."""
    parts = split_relative(path)
    if not parts:
        raise UnsafePath(errno.EISDIR, "cannot write the directory itself")
    with open_directory(root, parts[:-1], create=True, owner=owner) as parent:
        fd = _open_regular(parent, parts[-1], _WRITE, path)
        try:
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)


# --- walking -------------------------------------------------------------------------------------


@dataclass
class Entry:
    """One entry met by `walk`. `read` works only while the walk is at this entry."""

    path: str  # relative to the walk's root, "/"-separated, names as os.fsdecode gives them
    kind: FileKind
    info: os.stat_result
    depth: int
    dir_fd: int  # the directory holding it, open while the walk is at this entry
    name: str

    def read(self, limit: int) -> tuple[bytes, bool]:
        """At most `limit` bytes of this regular file, and whether it held more."""
        fd = _open_regular(self.dir_fd, self.name, _READ, self.path)
        try:
            return _read_fd(fd, limit)
        finally:
            os.close(fd)


@dataclass
class WalkLimits:
    max_depth: int = MAX_WALK_DEPTH
    max_entries: int = MAX_WALK_ENTRIES


class Walk:
    """Iterates over every entry below a directory, depth first, names sorted, without following
    links; directories listed in `skip` (by name, at any depth) are yielded but not entered.

    Stops descending below `max_depth` and stops altogether after `max_entries`; `incomplete` then
    says what was left out. Entries that vanish meanwhile are skipped. What cannot be read even
    after the owner's permissions are given back (a command racing the walk, a tree the worker does
    not own) is left out too; `unreadable` names the first such path."""

    def __init__(self, root: str | os.PathLike[str], *, under: str = "", limits: WalkLimits | None = None,
                 skip: frozenset[str] = frozenset()) -> None:
        self.root = root
        self.under = split_relative(under) if under else []
        self.limits = limits or WalkLimits()
        self.skip = skip
        self.incomplete = ""
        self.unreadable = ""
        self.count = 0

    def _cannot_read(self, path: str) -> None:
        if not self.unreadable:
            self.unreadable = path or "."

    def __iter__(self) -> Iterator[Entry]:
        try:
            context = open_directory(self.root, self.under)
            start = context.__enter__()
        except (FileNotFoundError, UnsafePath):
            return
        except PermissionError:
            self._cannot_read("/".join(self.under))
            return
        # Each open level: (descriptor, its path prefix, its depth, names still to visit).
        stack: list[tuple[int, str, int, list[str]]] = []
        try:
            try:
                stack.append((start, "/".join(self.under), 0, _sorted_names(start)))
            except PermissionError:
                self._cannot_read("/".join(self.under))
                return
            while stack:
                fd, prefix, depth, names = stack[-1]
                if not names:
                    stack.pop()
                    if stack:
                        os.close(fd)
                    continue
                name = names.pop()
                path = f"{prefix}/{name}" if prefix else name
                info = self._lstat(fd, name, path)
                if info is None:
                    continue
                if self.count >= self.limits.max_entries:
                    self.incomplete = f"stopped after {self.limits.max_entries:,} entries"
                    return
                self.count += 1
                entry = Entry(path, kind(info), info, depth + 1, fd, name)
                yield entry
                level = self._level_below(entry)
                if level is not None:
                    stack.append(level)
        finally:
            for fd, *_ in stack[1:]:
                os.close(fd)
            context.__exit__(None, None, None)

    def _lstat(self, fd: int, name: str, path: str) -> os.stat_result | None:
        """The entry `name` of the directory `fd` itself; None when it is gone or cannot be read."""
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except PermissionError:
            self._cannot_read(path)
            return None
        except OSError:
            return None

    def _level_below(self, entry: Entry) -> tuple[int, str, int, list[str]] | None:
        """The open level of the directory `entry` for the walk's stack, its names listed; None when
        the walk does not enter it (not a directory, skipped, too deep, gone or unreadable)."""
        if entry.kind != FileKind.DIR or entry.name in self.skip:
            return None
        if entry.depth >= self.limits.max_depth:
            self.incomplete = self.incomplete or f"directories deeper than {self.limits.max_depth} levels not entered ({display_name(entry.path)})"
            return None
        try:
            child = _open_directory_at(entry.dir_fd, entry.name, entry.path)
        except PermissionError:
            self._cannot_read(entry.path)
            return None
        except OSError:
            return None  # swapped for a link or removed meanwhile: nothing to follow
        try:
            listing = _sorted_names(child)
        except OSError as error:
            os.close(child)
            if isinstance(error, PermissionError):
                self._cannot_read(entry.path)
            return None
        return child, entry.path, entry.depth, listing


def _sorted_names(fd: int) -> list[str]:
    # Reversed so that pop() visits them in order.
    return sorted(os.listdir(fd), reverse=True)


@dataclass(frozen=True)
class Usage:
    bytes: int
    too_deep: bool  # directories go deeper than max_depth: the tree is over its limits whatever its size
    unreadable: str = ""  # a path that could not be measured: the tree is over its limits too


# Each entry counts at least one block in disk_usage, so a flood of empty files is bounded too.
MIN_ENTRY_BYTES = 4096


def disk_usage(root: str | os.PathLike[str], *, stop_above: int | None = None, max_depth: int = 256) -> Usage:
    """Bytes allocated under root, each entry counting at least MIN_ENTRY_BYTES (so a flood of
    empty files counts too), without following links; stops early above stop_above. Depth is a
    limit of its own: the walk holds a descriptor per level."""
    total = 0
    walk = Walk(root, limits=WalkLimits(max_depth=max_depth, max_entries=1 << 62))
    for entry in walk:
        total += max(entry.info.st_blocks * 512, MIN_ENTRY_BYTES)
        if stop_above is not None and total > stop_above:
            break
    return Usage(total, bool(walk.incomplete), walk.unreadable)


def chown_tree(root: str | os.PathLike[str], uid: int, gid: int) -> None:
    """Gives root and everything below it to uid:gid, links themselves included, none followed."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for entry in Walk(root, limits=WalkLimits(max_depth=4096, max_entries=1 << 62)):
        os.chown(entry.name, uid, gid, dir_fd=entry.dir_fd, follow_symlinks=False)


# --- removing ------------------------------------------------------------------------------------


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Removes path and everything below it, whatever it holds: links (never followed), special
    files, any depth, directories without write or search permission. A missing path is fine."""
    path = os.path.abspath(os.fspath(path))
    parent_path, name = os.path.split(path)
    try:
        parent = os.open(parent_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=parent)
            return
        _remove_directory(parent, name)
    finally:
        os.close(parent)


def _remove_directory(parent: int, name: str) -> None:
    top = _open_directory_at(parent, name, name)
    moved = 0
    # The open path from the top: [descriptor, name in its parent, subdirectories still to remove].
    stack: list[tuple[int, str, list[str]]] = [(top, name, _empty_files(top))]
    try:
        while stack:
            fd, _, subdirectories = stack[-1]
            if not subdirectories:
                stack.pop()
                os.close(fd)
                _unlink(stack[-1][0] if stack else parent, _, os.rmdir)
                continue
            subdirectory = subdirectories.pop()
            if len(stack) >= _REMOVE_OPEN_DEPTH:
                # Move the deep subtree up to the top, so it is taken apart with few open levels.
                moved += 1
                os.rename(subdirectory, f".removing-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                stack[0][2].append(f".removing-{moved}")
                continue
            child = _open_directory_at(fd, subdirectory, subdirectory)
            stack.append((child, subdirectory, _empty_files(child)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _empty_files(fd: int) -> list[str]:
    """Unlinks every entry of the directory but its subdirectories, and returns their names."""
    subdirectories = []
    with os.scandir(fd) as scan:
        entries = list(scan)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            subdirectories.append(entry.name)
        else:
            _unlink(fd, entry.name)
    return subdirectories


def _unlink(parent: int, name: str, remove: Callable[..., None] = os.unlink) -> None:
    """Removes an entry (`remove`: os.unlink, or os.rmdir for an emptied directory); a directory
    the agent made read-only is given write permission back first."""
    try:
        remove(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except PermissionError:
        os.chmod(parent, 0o700)
        remove(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except PermissionError:
        os.chmod(parent, 0o700)
        os.rmdir(name, dir_fd=parent)
