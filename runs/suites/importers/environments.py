"""An upstream paper's own environment file (pip's requirements.txt or conda's environment.yml) read
into our environment declaration ({"requirements": [...], "debian_packages": [...]}, every
requirement pinned `name==version`), with what cannot be translated said line by line.

Translated: pinned pip requirements (extras kept), conda packages pinned to one version whose PyPI
name is the same or known (pytorch -> torch), the `pip:` section of a conda file. Not translated,
each with its reason: ranges and unpinned names (a pin is what makes an environment reproducible,
and which version to pick is the user's call), URLs, editable installs, pip options, CUDA toolkits
(they come with the GPU machine's driver and the torch wheel), conda-only packages, channels'
build strings. A file with any problem gives no declaration: a half-translated environment would
fail at run time, where the import report says it now.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from sandbox.environments import requirement_problem

# Conda packages that exist under another name on PyPI.
CONDA_TO_PYPI = {"pytorch": "torch", "py-opencv": "opencv-python", "tensorflow-gpu": "tensorflow", "pytables": "tables"}
# Conda packages that are not Python packages (compilers, runtimes, CUDA): not ours to install.
CUDA_PACKAGES = re.compile(r"^(cudatoolkit|cuda-toolkit|cuda|cudnn|nccl|pytorch-cuda|cuda-.*|libcu.*|nvidia-.*)$")
CONDA_ONLY = re.compile(r"^(_.*|python|pip|setuptools|wheel|mkl.*|intel-openmp|blas|libblas|liblapack|openblas|libgcc.*|"
                        r"libstdcxx.*|libgfortran.*|ld_impl_.*|ca-certificates|certifi|openssl|libffi|ncurses|readline|"
                        r"sqlite|tk|xz|zlib|bzip2|libuuid|libzlib|tzdata|cpuonly|ffmpeg)$")


@dataclass
class TranslatedEnvironment:
    """The declaration (None when anything could not be translated) and the problems, each naming
    the file and line or entry."""

    environment: dict | None
    problems: list[str] = field(default_factory=list)
    python: str | None = None  # the Python version a conda file asks for, if any (reported, not enforced)


def _pinned(text: str, *, where: str, problems: list[str]) -> str | None:
    """`text` as a pinned pip requirement ("name[extra]==version"), else None with the reason in `problems`."""
    stripped = text.split(" #", 1)[0].strip()
    if stripped.startswith(("-", "--")):
        problems.append(f"{where}: {stripped!r}: pip options and editable installs are not translated")
        return None
    try:
        requirement = Requirement(stripped)
    except InvalidRequirement as error:
        problems.append(f"{where}: {stripped!r} is not a requirement pip reads ({error})")
        return None
    if requirement.url:
        problems.append(f"{where}: {stripped!r}: a URL requirement cannot be pinned by version; name a release")
        return None
    specifiers = list(requirement.specifier)
    if len(specifiers) != 1 or specifiers[0].operator not in ("==", "===") or "*" in specifiers[0].version:
        problems.append(f"{where}: {stripped!r} is not pinned to one version: write {requirement.name}==<version>")
        return None
    if requirement.marker:
        problems.append(f"{where}: {stripped!r} has an environment marker; an environment is built for one machine: "
                        "keep the line that applies without its marker")
        return None
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    pinned = f"{requirement.name}{extras}=={specifiers[0].version}"
    if problem := requirement_problem(pinned):  # the declaration's own rule (sandbox.environments), checked once more
        problems.append(f"{where}: {stripped!r} {problem}")
        return None
    return pinned


def _declaration(requirements: list[str], problems: list[str], python: str | None = None) -> TranslatedEnvironment:
    if problems or not requirements:
        if not requirements and not problems:
            problems.append("it names no package")
        return TranslatedEnvironment(None, problems, python)
    return TranslatedEnvironment({"requirements": requirements, "debian_packages": []}, [], python)


def from_requirements_txt(text: str, *, source: str = "requirements.txt") -> TranslatedEnvironment:
    requirements: list[str] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            pinned = _pinned(line, where=f"{source} line {number}", problems=problems)
            if pinned:
                requirements.append(pinned)
    return _declaration(requirements, problems)


def from_environment_yml(text: str, *, source: str = "environment.yml") -> TranslatedEnvironment:
    problems: list[str] = []
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return TranslatedEnvironment(None, [f"{source} is not YAML: {error}"])
    dependencies = document.get("dependencies") if isinstance(document, dict) else None
    if not isinstance(dependencies, list):
        return TranslatedEnvironment(None, [f"{source} has no 'dependencies' list"])
    requirements: list[str] = []
    python = None
    for index, entry in enumerate(dependencies):
        where = f"{source} dependencies[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("pip"), list):
            for pip_index, line in enumerate(entry["pip"]):
                pinned = _pinned(str(line), where=f"{where}.pip[{pip_index}]", problems=problems)
                if pinned:
                    requirements.append(pinned)
            continue
        if not isinstance(entry, str):
            problems.append(f"{where}: {entry!r} is neither a package nor a pip section")
            continue
        spec = entry.split("::", 1)[-1].strip()  # a channel prefix ("conda-forge::numpy") names where, not what
        name, _, rest = spec.partition("=")
        name = name.strip().lower()
        # "numpy=1.21.2=py38h..." or "numpy==1.21.2": the version; a build string has no PyPI meaning.
        version = rest.lstrip("=").partition("=")[0].strip()
        if name == "python":
            python = version or None
        elif CUDA_PACKAGES.match(name):
            problems.append(f"{where}: {entry!r} is a CUDA toolkit: it comes with the GPU machine's driver and the "
                            "torch wheel, not from the environment (drop it)")
        elif CONDA_ONLY.match(name):
            if name not in ("pip", "setuptools", "wheel", "cpuonly"):
                problems.append(f"{where}: {entry!r} is a conda-only package (no PyPI release to pin); "
                                "declare what it provides as a Debian package if the code needs it")
        elif not version or any(character in version for character in "<>*|,"):
            problems.append(f"{where}: {entry!r} is not pinned to one version: write {name}=<version>")
        else:
            pinned = _pinned(f"{CONDA_TO_PYPI.get(name, name)}=={version}", where=where, problems=problems)
            if pinned:
                requirements.append(pinned)
    return _declaration(requirements, problems, python)
