"""Python environments for sandboxes: one virtual environment per declared content, built once.

A suite or paper declares `{"requirements": ["numpy==1.26.4", ...], "debian_packages": [...]}`.
`environment_build` makes a venv with the interpreter the sandboxes run (`/usr/bin/python3`:
Debian's on the host, which bubblewrap binds, and the same path and version in the base Docker
image) and pip-installs the requirements with the machine's own pip configuration (its indexes,
its local wheels: never `--isolated`). The environment lives at `<root>/<key>`, where the key is a
hash of the declaration, the interpreter's version and the machine's architecture: the same
declaration on the same kind of machine is the same environment, built once.

Building is atomic and safe when two workers do it at once: under a lock file, into a temporary
directory beside the target, renamed into place when complete. A failed build leaves nothing at the
target and says which requirement or command failed, with pip's last lines. Debian packages are
installed on the host by sandbox/images/install_host_packages.sh (bubblewrap binds the host's /usr);
the Docker backend does not install them (a suite image does: sandbox/images/build_suite_image.sh).

The sandboxes bind the environment read-only at the same absolute path and put its bin/ first on
PATH (open_sandbox's `environment`), so `python3` in either backend is the environment's.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .base import SandboxError
from .images import script

# The interpreter every sandbox runs: the host's for bubblewrap, the image's (same path) for Docker.
SANDBOX_PYTHON = "/usr/bin/python3"
# Written last into a complete environment: what it was built from (and the proof it is complete).
MANIFEST = "autoexperiment-environment.json"
# name==version, optional extras; PEP 440 version characters but no wildcard (==1.* is a range).
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?"
    r"==(?P<version>[A-Za-z0-9](?:[A-Za-z0-9.!+_-]*[A-Za-z0-9])?)$"
)
_DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
BUILD_TIMEOUT_SECONDS = 3600
_PIP_TAIL_LINES = 15

Log = Callable[[str], None]


class EnvironmentBuildError(SandboxError):
    """An environment declaration is invalid, or its build failed (the message says what and where)."""


def requirement_problem(requirement: object) -> str | None:
    """Why `requirement` is not an exactly pinned requirement (None when it is one)."""
    if not isinstance(requirement, str):
        return "is not a string"
    text = requirement.strip()
    if text.startswith("-"):
        return "is a pip option; only requirements are allowed (name==version)"
    if "://" in text or "@" in text:
        return "is a URL or direct reference; only index packages pinned as name==version are allowed"
    if not _REQUIREMENT.match(requirement):
        return "is not pinned exactly: expected name==version (extras allowed, e.g. numpy==1.26.4), no ranges or markers"
    return None


def debian_package_problem(package: object) -> str | None:
    if not isinstance(package, str) or not _DEBIAN_PACKAGE.match(package):
        return "is not a Debian package name (lowercase letters, digits, '+', '-', '.')"
    return None


@dataclass(frozen=True)
class Declaration:
    """What an environment holds; `canonical()` is what its key hashes."""

    requirements: tuple[str, ...] = ()
    debian_packages: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: dict) -> Declaration:
        """From a stored declaration; raises EnvironmentBuildError naming each bad entry."""
        requirements = tuple(value.get("requirements") or ())
        packages = tuple(value.get("debian_packages") or ())
        bad = [f"requirement {item!r} {problem}" for item in requirements if (problem := requirement_problem(item))]
        bad += [f"Debian package {item!r} {problem}" for item in packages if (problem := debian_package_problem(item))]
        if bad:
            raise EnvironmentBuildError("; ".join(bad))
        return cls(requirements=requirements, debian_packages=packages)

    def canonical(self) -> dict:
        # Order does not change what pip or apt install: sorted, so it does not change the key either.
        return {"requirements": sorted(self.requirements), "debian_packages": sorted(self.debian_packages)}


@functools.cache
def interpreter_version(python: str = SANDBOX_PYTHON) -> str:
    """The full version of the sandboxes' interpreter (a venv only works with the version it was made by)."""
    try:
        completed = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, timeout=60, check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise EnvironmentBuildError(f"cannot run the sandboxes' interpreter {python}: {error}") from error
    return completed.stdout.strip()


def environment_key(declaration: Declaration, *, python: str = SANDBOX_PYTHON) -> str:
    """The environment's name: a hash of its declaration, the interpreter's version and the machine."""
    content = {
        "declaration": declaration.canonical(),
        "python": interpreter_version(python),
        "machine": platform.machine(),
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def environment_path(root: Path, declaration: Declaration, *, python: str = SANDBOX_PYTHON) -> Path:
    """Where the environment of `declaration` is (built or not)."""
    return Path(root) / environment_key(declaration, python=python)


def environment_built(path: Path) -> bool:
    """Whether `path` holds a complete environment (only a finished build is ever renamed there)."""
    return (Path(path) / MANIFEST).is_file()


def environment_build(
    root: Path, declaration: Declaration, *, python: str = SANDBOX_PYTHON, log: Log = lambda line: None,
    timeout: float = BUILD_TIMEOUT_SECONDS,
) -> tuple[Path, bool]:
    """(the environment's path, whether it was built now); a no-op when it is built already.

    Raises EnvironmentBuildError naming what failed; nothing is then left at the path.
    """
    root = Path(root)
    target = environment_path(root, declaration, python=python)
    if environment_built(target):
        return target, False
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)  # the sandbox uid reads the environments through it
    with _locked(root / f".{target.name}.lock"):
        if environment_built(target):  # another worker built it while this one waited
            return target, False
        for leftover in root.glob(f".{target.name}.building-*"):  # of a builder that crashed
            shutil.rmtree(leftover, ignore_errors=True)
        if target.exists():  # incomplete, from before builds were atomic, or tampered with
            shutil.rmtree(target)
        building = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}.building-"))
        try:
            _build_into(building, target, declaration, python=python, log=log, timeout=timeout)
            os.rename(building, target)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
    return target, True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_into(building: Path, target: Path, declaration: Declaration, *, python: str, log: Log, timeout: float) -> None:
    os.chmod(building, 0o755)
    if declaration.debian_packages:
        log(f"installing Debian packages on the host: {' '.join(declaration.debian_packages)}")
        _run([str(script("install_host_packages.sh")), *declaration.debian_packages],
             what=f"installing Debian packages {' '.join(declaration.debian_packages)}", timeout=timeout)
    log(f"creating a virtual environment with {python} ({interpreter_version(python)})")
    _run([python, "-m", "venv", "--without-pip", str(building)], what=f"{python} -m venv", timeout=timeout)
    if declaration.requirements:
        log(f"pip install {' '.join(declaration.requirements)}")
        # The host's pip, run for the environment's interpreter (--python): the environment needs no
        # pip of its own (sandboxes have no network). No --isolated: the machine's pip configuration
        # (indexes, local wheels, certificates) is what makes its packages installable. No byte code
        # yet: it would name the temporary directory as its source (compiled below, for the target).
        _run(
            [python, "-m", "pip", "--python", str(building / "bin" / "python"), "install", "--no-input",
             "--no-compile", "--no-cache-dir", "--disable-pip-version-check", *declaration.requirements],
            what="pip install", requirements=declaration.requirements, timeout=timeout,
        )
    _retarget_scripts(building, target)
    # Sandboxes cannot write byte code (the environment is read-only, PYTHONDONTWRITEBYTECODE):
    # compile it once, naming the files where they will be. Like pip, tolerate files that do not
    # compile: packages ship some for other Python versions (torch's py312_intrinsics.py).
    _run([python, "-m", "compileall", "-q", "-j", "0", "-s", str(building), "-p", str(target), str(building / "lib")],
         what="compiling the environment's byte code", timeout=timeout, check=False)
    manifest = {
        **declaration.canonical(),
        "python": interpreter_version(python),
        "machine": platform.machine(),
        "packages": _installed(building, python=python),
    }
    (building / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for directory, _, files in os.walk(building):
        os.chmod(directory, 0o755)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


def _installed(building: Path, *, python: str) -> list[str]:
    completed = _run([python, "-m", "pip", "--python", str(building / "bin" / "python"), "list", "--format=freeze",
                      "--disable-pip-version-check"], what="pip list", timeout=300, check=False)
    return sorted(line for line in completed.stdout.splitlines() if "==" in line)


def _retarget_scripts(building: Path, target: Path) -> None:
    """Entry-point scripts, activate files and pyvenv.cfg name the directory they were made in; after
    the rename they must name the target."""
    old, new = str(building).encode(), str(target).encode()
    for path in [*(building / "bin").iterdir(), building / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))


def _run(
    argv: Sequence[str], *, what: str, timeout: float, requirements: Sequence[str] = (), check: bool = True
) -> subprocess.CompletedProcess[str]:
    try:
        completed = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                                   stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        raise EnvironmentBuildError(f"{what} took longer than {timeout:g} s and was stopped") from error
    except OSError as error:
        raise EnvironmentBuildError(f"{what} could not be started: {error}") from error
    if check and completed.returncode != 0:
        output = (completed.stdout + completed.stderr).strip().splitlines()
        tail = "\n".join(output[-_PIP_TAIL_LINES:])
        failed = [requirement for requirement in requirements if requirement in tail] or list(requirements)
        subject = f"{what} failed for {', '.join(failed)}" if failed else f"{what} failed"
        raise EnvironmentBuildError(f"{subject} (exit {completed.returncode}); its last lines:\n{tail}")
    return completed
