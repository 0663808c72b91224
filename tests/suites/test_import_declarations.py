"""A suite's and a paper's environment, data files and GPU needs: read, checked and stored on import."""
import hashlib
import json

import pytest

from runs.models import Paper, Suite
from runs.suites.importers.common import SuiteFormatError
from runs.suites.importers.native import import_native_suite

pytestmark = pytest.mark.django_db

DIGEST = hashlib.sha256(b"1,2,3\n").hexdigest()


def declared_suite(tmp_path, native_suite_writer, native_paper, *, suite_environment=None, **paper_keys):
    native_paper.update(paper_keys)
    suite = {"name": "toy", "version": "1.0", "papers": ["toy-paper"]}
    if suite_environment is not None:
        suite["environment"] = suite_environment
    root = native_suite_writer(tmp_path / "toy", suite=suite, paper=native_paper)
    (root / "toy-paper" / "data").mkdir()
    (root / "toy-paper" / "data" / "numbers.csv").write_bytes(b"1,2,3\n")
    return root


def test_declarations_are_stored(tmp_path, native_suite_writer, native_paper):
    data = [
        {"name": "numbers.csv", "source": "data/numbers.csv", "sha256": DIGEST, "size": 6},
        {"name": "remote.npz", "source": "https://example.org/remote.npz", "sha256": "0" * 64, "size": 10},
    ]
    root = declared_suite(
        tmp_path, native_suite_writer, native_paper,
        suite_environment={"requirements": ["numpy==1.26.4"]},
        environment={"requirements": ["torch==2.13.0", "scikit-learn[alldeps]==1.5.2"], "debian_packages": ["libgomp1"]},
        data=data, gpu="optional", gpus=2,
    )

    suite, _ = import_native_suite(root)

    assert suite.environment == {"requirements": ["numpy==1.26.4"], "debian_packages": []}
    paper = suite.papers.get()
    assert paper.environment == {"requirements": ["torch==2.13.0", "scikit-learn[alldeps]==1.5.2"],
                                 "debian_packages": ["libgomp1"]}
    assert paper.data == data
    assert (paper.gpu, paper.gpus) == ("optional", 2)


def test_nothing_declared_is_today_s_behaviour(native_suite):
    suite, _ = import_native_suite(native_suite)

    paper = suite.papers.get()
    assert (suite.environment, paper.environment, paper.data, paper.gpu, paper.gpus) == (None, None, [], "none", 1)


BAD_DECLARATIONS = {
    "range": ({"environment": {"requirements": ["numpy>=1.26"]}},
              "toy-paper/paper.json: environment.requirements: 'numpy>=1.26' is not pinned exactly"),
    "url": ({"environment": {"requirements": ["pkg @ https://example.org/pkg.whl"]}},
            "environment.requirements: 'pkg @ https://example.org/pkg.whl' is a URL or direct reference"),
    "option": ({"environment": {"requirements": ["--index-url=https://evil.example/simple"]}},
               "environment.requirements: '--index-url=https://evil.example/simple' is a pip option"),
    "wildcard": ({"environment": {"requirements": ["numpy==1.*"]}}, "'numpy==1.*' is not pinned exactly"),
    "unknown key": ({"environment": {"requirement": ["numpy==1.26.4"]}}, "environment.requirement: unknown key"),
    "bad debian package": ({"environment": {"debian_packages": ["libfoo; rm -rf /"]}},
                           "environment.debian_packages: 'libfoo; rm -rf /' is not a Debian package name"),
    "data climbs out": ({"data": [{"name": "x", "source": "../../etc/passwd", "sha256": DIGEST, "size": 6}]},
                        "toy-paper/paper.json: data[0].source: must be a relative path inside the paper's directory"),
    "data name with a slash": ({"data": [{"name": "a/b", "source": "data/numbers.csv", "sha256": DIGEST, "size": 6}]},
                               "data[0].name: 'a/b' is not a plain file name"),
    "bad hash": ({"data": [{"name": "n", "source": "data/numbers.csv", "sha256": "abc", "size": 6}]},
                 "data[0].sha256: expected 64 lowercase hex digits, got 'abc'"),
    "missing local file": ({"data": [{"name": "n", "source": "data/gone.csv", "sha256": DIGEST, "size": 6}]},
                           "data[0].source: no file data/gone.csv in toy-paper/"),
    "ftp": ({"data": [{"name": "n", "source": "ftp://example.org/n", "sha256": DIGEST, "size": 6}]},
            "data[0].source: must be an http(s) URL or a path relative to the paper's directory"),
    "stale hash": ({"data": [{"name": "n", "source": "data/numbers.csv", "sha256": "0" * 64, "size": 6}]},
                   f"toy-paper/paper.json: data[0]: data/numbers.csv has 6 bytes with sha256 {DIGEST}, but 6 bytes "
                   f"with sha256 {'0' * 64} are declared"),
    "a name twice": ({"data": [{"name": "n", "source": "data/numbers.csv", "sha256": DIGEST, "size": 6}] * 2},
                     "data: names a file more than once"),
    "gpu": ({"gpu": "maybe"}, 'gpu: expected "none", "optional" or "required", got \'maybe\''),
    "gpus": ({"gpus": 0}, "gpus: expected a number of GPUs from 1 to 64, got 0"),
}


@pytest.mark.parametrize("case", BAD_DECLARATIONS, ids=list(BAD_DECLARATIONS))
def test_bad_declaration_is_refused_naming_the_entry(tmp_path, native_suite_writer, native_paper, case):
    keys, expected = BAD_DECLARATIONS[case]
    root = declared_suite(tmp_path, native_suite_writer, native_paper, **keys)

    with pytest.raises(SuiteFormatError) as raised:
        import_native_suite(root)

    assert expected in str(raised.value)
    assert not Suite.objects.exists()


def test_a_data_link_leading_out_of_the_suite_is_refused(tmp_path, native_suite_writer, native_paper):
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"1,2,3\n")
    root = declared_suite(tmp_path, native_suite_writer, native_paper,
                          data=[{"name": "n", "source": "data/link.csv", "sha256": DIGEST, "size": 6}])
    (root / "toy-paper" / "data" / "link.csv").symlink_to(outside)

    with pytest.raises(SuiteFormatError, match=r"data\[0\]\.source: leads outside the suite"):
        import_native_suite(root)


def test_suite_environment_is_checked_too(tmp_path, native_suite_writer, native_paper):
    root = declared_suite(tmp_path, native_suite_writer, native_paper, suite_environment={"requirements": ["numpy"]})

    with pytest.raises(SuiteFormatError, match=r"suite.json: environment.requirements: 'numpy' is not pinned exactly"):
        import_native_suite(root)


def test_removing_a_declaration_clears_it(tmp_path, native_suite_writer, native_paper):
    root = declared_suite(tmp_path, native_suite_writer, native_paper, environment={"requirements": ["six==1.16.0"]})
    import_native_suite(root)
    paper_json = root / "toy-paper" / "paper.json"
    paper_json.write_text(json.dumps({key: value for key, value in json.loads(paper_json.read_text()).items()
                                      if key != "environment"}))

    import_native_suite(root)

    assert Paper.objects.get().environment is None
