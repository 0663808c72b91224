"""What a paper's sandboxes run with: its Python environment and its data files.

A suite or paper declares them (suite.json/paper.json "environment" and "data", stored on import);
`paper_prepare` builds the environment (sandbox.environments, once per declared content under
ENVIRONMENTS_ROOT) and fetches the data (runs.benchmark.datafiles, once per file under
DATA_CACHE_ROOT) on this machine: `manage.py build_environment` and `manage.py fetch_data` call it.

`paper_sandbox` is the one way the harness opens a sandbox on a paper's workspace (attempts,
re-execution, transplants, make_gold, validate_suite): it binds the paper's environment and data,
and raises NotPrepared, naming the command that prepares it, when this machine lacks either. It
never builds or downloads anything itself: a worker is not where hour-long builds or network
access belong, and two hundred attempts must not each find out the hard way.

A paper that declares nothing runs as before: the host's /usr (bubblewrap), the base image (Docker).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from runs.benchmark.datafiles import DataError, DataFile, cached, data_fetch
from runs.models import Paper, Suite
from runs.suites.importers.native import native_suite_read
from runs.suites.selectors import suite_get
from sandbox import Backend, Sandbox, canonical_backend, open_sandbox
from sandbox.environments import (
    Declaration,
    EnvironmentBuildError,
    environment_build,
    environment_built,
    environment_path,
)
from sandbox.gpus import gpu_lease

Log = Callable[[str], None]


class NotPrepared(Exception):
    """This machine lacks a paper's environment or data files (the message says which command
    prepares them), or the backend cannot provide what the paper declares."""


class PreparationError(Exception):
    """Building an environment or fetching a data file failed (the message says what and where)."""


@dataclass(frozen=True)
class PaperNeeds:
    """What one paper's sandboxes need, read from the database or from a suite directory."""

    suite_name: str
    paper_id: str
    environment: Declaration | None
    data: list[DataFile] = field(default_factory=list)

    @property
    def prepare_command(self) -> str:
        return f"python manage.py build_environment {self.suite_name} --paper {self.paper_id}"


def paper_needs(paper: Paper) -> PaperNeeds:
    """The paper's environment (its own, else its suite's: a paper's replaces the suite's) and data."""
    declared = paper.environment if paper.environment is not None else paper.suite.environment
    paper_dir = Path(paper.code_dir).parent if paper.code_dir else None
    within = Path(paper.suite.gold_root) if paper.suite.gold_root else paper_dir
    return PaperNeeds(
        suite_name=paper.suite.name,
        paper_id=paper.paper_id,
        environment=_declaration(declared, paper.paper_id),
        data=[DataFile.from_entry(entry, base=paper_dir, within=within) for entry in paper.data or []],
    )


def suite_needs(*, suite: str, paper_id: str | None = None) -> list[PaperNeeds]:
    """Every paper's needs (or paper `paper_id`'s) of `suite`: a directory in our format (read, not
    imported) or the name of an imported suite. Raises Suite.DoesNotExist, SuiteFormatError."""
    path = Path(suite)
    if path.is_dir():
        spec = native_suite_read(path)
        needs = [
            PaperNeeds(
                suite_name=spec.name,
                paper_id=paper.paper_id,
                environment=_declaration(paper.environment if paper.environment is not None else spec.environment,
                                         paper.paper_id),
                data=[DataFile.from_entry(entry, base=Path(paper.code_dir).parent, within=Path(spec.root))
                      for entry in paper.data],
            )
            for paper in spec.papers
        ]
        name = spec.name
    else:
        imported = suite_get(name=suite)
        needs = [paper_needs(paper) for paper in imported.papers.select_related("suite").order_by("paper_id")]
        name = imported.name
    if paper_id is not None:
        needs = [need for need in needs if need.paper_id == paper_id]
        if not needs:
            raise Suite.DoesNotExist(f"suite {name} has no paper {paper_id!r}")
    return needs


def _declaration(declared: dict | None, paper_id: str) -> Declaration | None:
    if declared is None:
        return None
    try:
        return Declaration.from_json(declared)
    except EnvironmentBuildError as error:  # stored before the rules tightened
        raise NotPrepared(f"paper {paper_id}: its environment declaration is invalid: {error}") from None


def paper_prepare(needs: PaperNeeds, *, log: Log, environment: bool = True, data: bool = True) -> None:
    """Build the paper's environment and fetch its data files on this machine; each a no-op when
    done already. Raises PreparationError naming the paper and what failed."""
    if environment and needs.environment is not None:
        started = time.monotonic()
        try:
            path, built = environment_build(settings.ENVIRONMENTS_ROOT, needs.environment, log=log)
        except EnvironmentBuildError as error:
            raise PreparationError(f"paper {needs.paper_id}: the environment could not be built: {error}") from None
        state = f"built in {time.monotonic() - started:.1f} s" if built else "already built"
        log(f"paper {needs.paper_id}: environment {path}: {state}")
    elif environment:
        log(f"paper {needs.paper_id}: no environment declared (the sandboxes' default)")
    if data:
        for file in needs.data:
            try:
                path, fetched = data_fetch(settings.DATA_CACHE_ROOT, file, where=f"paper {needs.paper_id}")
            except DataError as error:
                raise PreparationError(str(error)) from None
            log(f"paper {needs.paper_id}: data file {file.name}: {'fetched' if fetched else 'already cached'} ({path})")


@dataclass(frozen=True)
class Provisions:
    """What a sandbox of the paper binds: the environment (None: the default) and name -> data file."""

    environment: Path | None
    data: dict[str, Path]


def paper_provisions(paper: Paper, *, backend: str) -> Provisions:
    """The paper's built environment and cached data files on this machine; NotPrepared when
    something is missing (naming the command that prepares it) or the backend cannot provide it."""
    needs = paper_needs(paper)
    environment = None
    if needs.environment is not None:
        if needs.environment.debian_packages and canonical_backend(backend) == Backend.DOCKER:
            raise NotPrepared(
                f"paper {needs.paper_id} declares Debian packages ({', '.join(needs.environment.debian_packages)}), "
                "which the Docker backend does not install: run it on the bubblewrap backend (whose sandboxes use "
                "the host's packages, installed by `" + needs.prepare_command + "`)"
            )
        environment = environment_path(settings.ENVIRONMENTS_ROOT, needs.environment)
        if not environment_built(environment):
            raise NotPrepared(
                f"paper {needs.paper_id}: its environment is not built on this machine ({environment}); "
                f"build it with `{needs.prepare_command}`"
            )
    if paper.gpu == Paper.Gpu.REQUIRED and paper.gpus > len(settings.WORKER_GPUS):
        raise NotPrepared(
            f"paper {needs.paper_id} needs {paper.gpus} GPU(s) and this worker may use {len(settings.WORKER_GPUS)} "
            f"(WORKER_GPUS={','.join(settings.WORKER_GPUS) or 'none'}): run it on a worker with GPUs"
        )
    data = {}
    for file in needs.data:
        path = cached(settings.DATA_CACHE_ROOT, file)
        if path is None:
            raise NotPrepared(
                f"paper {needs.paper_id}: data file {file.name} is not fetched on this machine; "
                f"fetch it with `{needs.prepare_command}` (or `python manage.py fetch_data {needs.suite_name} "
                f"--paper {needs.paper_id}`)"
            )
        data[file.name] = path
    return Provisions(environment=environment, data=data)


def paper_sandbox(paper: Paper, *, backend: str, workspace: Path, name: str, image: str | None = None, **options) -> Sandbox:
    """A sandbox on `workspace` with the paper's environment and data bound (open_sandbox's other
    arguments pass through). Raises NotPrepared before opening anything when they are missing;
    SandboxError as open_sandbox does."""
    provisions = paper_provisions(paper, backend=backend)
    lease = ExitStack()
    gpus = lease.enter_context(_paper_gpus(paper))
    try:
        sandbox = open_sandbox(backend, workspace, name=name, image=image, environment=provisions.environment,
                               data=provisions.data, gpus=",".join(gpus) or None, **options)
    except BaseException:
        lease.close()
        raise
    sandbox.gpu_ids = gpus
    sandbox.call_on_close(lease.close)
    return sandbox


def _paper_gpus(paper: Paper):
    """The GPUs a sandbox of `paper` leases for its life (sandbox.gpus): none for a paper that needs
    none; for one that may use a GPU, Paper.gpus of this worker's if free now, else none (the CPU);
    for one that needs one, Paper.gpus, waiting until they are free."""
    if paper.gpu == Paper.Gpu.NONE or paper.gpus > len(settings.WORKER_GPUS):
        return nullcontext([])  # a paper that needs more than this worker has was refused by paper_provisions
    return gpu_lease(paper.gpus, devices=settings.WORKER_GPUS, lock_dir=settings.GPU_LOCK_DIR,
                     wait=paper.gpu == Paper.Gpu.REQUIRED)
