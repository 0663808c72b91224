"""A built Python environment and data files bound read-only into both backends; building once,
atomically, under a lock, and failing with the requirement named."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox import SandboxError, open_sandbox
from sandbox.base import sandbox_identity
from sandbox.environments import (
    MANIFEST,
    Declaration,
    EnvironmentBuildError,
    environment_build,
    environment_key,
    environment_path,
)
from tests.support import TINY_REQUIREMENT

REPOSITORY = Path(__file__).resolve().parents[2]
DATA = b"label,value\n1,2\n"


@pytest.fixture
def reachable(tmp_path):
    """A directory the sandbox uid can reach (data files live in such a cache)."""
    directory = Path(tempfile.mkdtemp(prefix="autoexperiment-test-data-"))
    os.chmod(directory, 0o755)
    yield directory
    subprocess.run(["rm", "-rf", str(directory)], check=False)


@pytest.fixture
def data_file(reachable) -> Path:
    path = reachable / "numbers.csv"
    path.write_bytes(DATA)
    os.chmod(path, 0o444)
    return path


@pytest.mark.slow
def test_the_environment_s_python_and_packages_are_the_sandbox_s(backend, built_environment, data_file, tmp_path):
    _, environment = built_environment
    with open_sandbox(backend, tmp_path, environment=environment, data={"numbers.csv": data_file}) as box:
        imported = box.execute('python3 -c "import six, sys; print(six.__file__); print(sys.prefix)"', timeout=60)
        data = box.execute("cat /data/numbers.csv", timeout=30)

    assert imported.ok, imported.output
    module, prefix = imported.output.split()
    assert Path(module).is_relative_to(environment) and prefix == str(environment)
    assert data.output.encode() == DATA


@pytest.mark.slow
def test_a_sandbox_cannot_change_the_environment_or_the_data(backend, built_environment, reachable, tmp_path):
    # Copies the sandbox user owns and may write: only the read-only binds stop it.
    environment = reachable / "environment"
    shutil.copytree(built_environment[1], environment, symlinks=True)
    data_file = reachable / "numbers.csv"
    data_file.write_bytes(DATA)
    uid, gid = sandbox_identity()
    for path in [data_file, reachable, *environment.rglob("*"), environment]:
        os.lchown(path, uid, gid)
        if not path.is_symlink():
            path.chmod(0o777 if path.is_dir() else 0o666)
    site = next(environment.glob("lib/python3*/site-packages"))
    attacks = [
        "echo forged > /data/numbers.csv",
        "rm -f /data/numbers.csv",
        "mv /data/numbers.csv /data/moved.csv",
        "touch /data/new.csv",
        "chmod 666 /data/numbers.csv",
        f"echo 'raise SystemExit' > {site}/six.py",
        f"touch {site}/sitecustomize.py",
        f"rm -rf {environment}/bin",
        f"ln -s /tmp {environment}/evil",
    ]
    before = (site / "six.py").read_bytes()
    with open_sandbox(backend, tmp_path, environment=environment, data={"numbers.csv": data_file}) as box:
        results = {attack: box.execute(attack, timeout=30) for attack in attacks}
        after_in_sandbox = box.execute("cat /data/numbers.csv; ls /data", timeout=30).output

    assert all(not result.ok for result in results.values()), {a: r.output for a, r in results.items() if r.ok}
    assert all("Read-only file system" in result.output for result in results.values())
    assert data_file.read_bytes() == DATA and (site / "six.py").read_bytes() == before
    assert not (site / "sitecustomize.py").exists() and (environment / "bin").is_dir()
    assert after_in_sandbox == DATA.decode() + "numbers.csv\n"


def test_a_data_file_the_sandbox_uid_cannot_reach_is_refused_when_opening(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a non-root worker's sandbox runs as the worker, which reaches its own files")
    locked = tmp_path / "locked"  # pytest-of-root is 0700: not searchable by the sandbox uid
    locked.mkdir()
    (locked / "numbers.csv").write_bytes(DATA)
    workspace = tmp_path / "ws"
    workspace.mkdir()

    with pytest.raises(SandboxError, match="cannot read .*numbers.csv: .* is not searchable by other users"):
        open_sandbox("bubblewrap", workspace, data={"numbers.csv": locked / "numbers.csv"})


def test_bad_bindings_are_refused(tmp_path, data_file):
    with pytest.raises(SandboxError, match="not a plain file name"):
        open_sandbox("bubblewrap", tmp_path, data={"../etc/passwd": data_file})
    with pytest.raises(SandboxError, match="not an absolute path of a built environment"):
        open_sandbox("bubblewrap", tmp_path, environment=tmp_path / "nothing")


@pytest.mark.slow
def test_a_second_build_is_a_no_op(built_environment):
    root, environment = built_environment

    path, built = environment_build(root, Declaration(requirements=(TINY_REQUIREMENT,)))

    assert (path, built) == (environment, False)
    manifest = json.loads((environment / MANIFEST).read_text())
    assert manifest["requirements"] == [TINY_REQUIREMENT] and TINY_REQUIREMENT in manifest["packages"]


def test_the_key_is_the_content_not_the_order():
    one = Declaration(requirements=("six==1.17.0", "idna==3.7"))
    same = Declaration(requirements=("idna==3.7", "six==1.17.0"))
    other = Declaration(requirements=("six==1.16.0", "idna==3.7"))

    assert environment_key(one) == environment_key(same) != environment_key(other)


_BUILD = """
import json, sys
sys.path.insert(0, {repository!r})
from sandbox.environments import Declaration, environment_build
path, built = environment_build({root!r}, Declaration(requirements=({requirement!r},)))
print(json.dumps({{"path": str(path), "built": built}}))
"""


@pytest.mark.slow
def test_two_builds_at_once_give_one_environment(reachable):
    script = _BUILD.format(repository=str(REPOSITORY), root=str(reachable), requirement=TINY_REQUIREMENT)
    builders = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    results = [json.loads(builder.communicate(timeout=600)[0]) for builder in builders]

    assert sorted(result["built"] for result in results) == [False, True]  # one built it, the other waited
    target = environment_path(reachable, Declaration(requirements=(TINY_REQUIREMENT,)))
    assert {result["path"] for result in results} == {str(target)}
    assert sorted(os.listdir(reachable)) == sorted([target.name, f".{target.name}.lock"])  # no half-built copies
    completed = subprocess.run([target / "bin" / "python3", "-c", "import six; print(six.__file__)"],
                               capture_output=True, text=True, check=True)
    assert completed.stdout.startswith(str(target))
    # Nothing names the temporary build directory any more (scripts, pyvenv.cfg, byte code's sources).
    assert ".building-" not in (target / "pyvenv.cfg").read_text()
    six_code = next(target.glob("lib/python3*/site-packages/__pycache__/six.*.pyc")).read_bytes()
    assert b".building-" not in six_code and str(target).encode() in six_code


@pytest.mark.slow
def test_a_failing_requirement_is_named_and_nothing_is_left(reachable):
    declaration = Declaration(requirements=(TINY_REQUIREMENT, "idna==99.0"))

    with pytest.raises(EnvironmentBuildError) as raised:
        environment_build(reachable, declaration)

    message = str(raised.value)
    assert message.startswith("pip install failed for idna==99.0 (exit 1); its last lines:")
    assert "No matching distribution found for idna==99.0" in message
    assert os.listdir(reachable) == [f".{environment_path(reachable, declaration).name}.lock"]


@pytest.mark.parametrize("requirement, problem", [
    ("numpy", "is not pinned exactly"),
    ("numpy>=1.26", "is not pinned exactly"),
    ("numpy==1.*", "is not pinned exactly"),
    ("numpy==1.26.4; python_version<'3.12'", "is not pinned exactly"),
    ("--extra-index-url=https://evil.example", "is a pip option"),
    ("numpy @ https://evil.example/numpy.whl", "is a URL or direct reference"),
    ("-e git+https://evil.example/x.git", "is a pip option"),
])
def test_a_requirement_that_is_not_an_exact_pin_is_refused_by_name(requirement, problem):
    with pytest.raises(EnvironmentBuildError, match=re.escape(f"requirement {requirement!r} {problem}")):
        Declaration.from_json({"requirements": [requirement]})


def test_docker_refuses_an_environment_of_another_python_than_the_image_s(tmp_path, reachable):
    import docker

    from tests.support import require_backend

    require_backend("docker")
    client = docker.from_env()
    base = client.images.get(os.environ.get("SANDBOX_IMAGE") or "autoexperiment-base:bookworm")
    container = client.containers.create(base.id, ["true"])
    labelled = "autoexperiment-test-python-label:latest"
    try:
        container.commit(repository=labelled.split(":")[0], tag="latest",
                         changes=["LABEL org.autoexperiment.python=3.11.2"])
        made_elsewhere = reachable / "env"
        (made_elsewhere / "bin").mkdir(parents=True)
        (made_elsewhere / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.13.1\n")

        with pytest.raises(SandboxError, match=r"made by Python 3\.13\.1, but image .* has Python 3\.11\.2"):
            open_sandbox("docker", tmp_path, image=labelled, environment=made_elsewhere)
    finally:
        container.remove(force=True)
        try:
            client.images.remove(labelled, force=True)
        except docker.errors.ImageNotFound:
            pass
        client.close()
