"""One place knows the backends' names and aliases; the settings and run creation ask it."""
import pytest

from sandbox import BACKEND_NAMES, BACKENDS, SandboxError, canonical_backend


def test_aliases_name_a_backend():
    assert canonical_backend("bwrap") == "bubblewrap"
    assert all(canonical_backend(backend) == backend for backend in BACKENDS)
    assert set(BACKEND_NAMES.values()) == set(BACKENDS)


def test_unknown_backend_is_refused():
    with pytest.raises(SandboxError, match="unknown sandbox backend 'chroot'"):
        canonical_backend("chroot")
