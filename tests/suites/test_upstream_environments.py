"""An upstream paper's requirements.txt / environment.yml read into our environment declaration, and
every line that cannot be translated named with its reason."""
from __future__ import annotations

import textwrap

from runs.suites.importers.environments import from_environment_yml, from_requirements_txt


def test_pinned_requirements_become_the_declaration():
    text = "# training\ntorch==2.13.0\nnumpy == 1.26.4  # arrays\nPillow[jpeg]==10.0.1\n\nscipy==1.11.4\n"
    translated = from_requirements_txt(text)
    assert translated.problems == []
    assert translated.environment == {
        "requirements": ["torch==2.13.0", "numpy==1.26.4", "Pillow[jpeg]==10.0.1", "scipy==1.11.4"],
        "debian_packages": [],
    }
    marked = from_requirements_txt("scipy==1.11.4; python_version >= '3.9'\n")
    assert marked.environment is None and "environment marker" in marked.problems[0]


def test_unpinned_urls_and_options_are_named_line_by_line_and_nothing_is_declared():
    text = "torch>=1.10\nnumpy\n-e git+https://github.com/x/y#egg=y\nfoo @ https://example.org/foo.whl\ntqdm==4.*\nscipy==1.11.4\n"
    translated = from_requirements_txt(text, source="2205.00048/requirements.txt")
    assert translated.environment is None
    assert [problem.split(":")[0] for problem in translated.problems] == [
        f"2205.00048/requirements.txt line {line}" for line in (1, 2, 3, 4, 5)
    ]
    assert "write torch==<version>" in translated.problems[0]
    assert "URL" in translated.problems[3]


def test_a_conda_file_translates_its_pins_and_pip_section_and_reports_cuda_and_conda_only_packages():
    text = textwrap.dedent("""\
        name: paper
        channels: [pytorch, conda-forge]
        dependencies:
          - python=3.8
          - pytorch=1.10.0=py3.8_cuda11.3_cudnn8.2.0_0
          - conda-forge::numpy=1.21.2
          - pip
          - pip:
            - transformers==4.12.0
    """)
    clean = from_environment_yml(text)
    assert clean.problems == [] and clean.python == "3.8"
    assert clean.environment["requirements"] == ["torch==1.10.0", "numpy==1.21.2", "transformers==4.12.0"]

    troubled = from_environment_yml(text + "  - cudatoolkit=11.3\n  - mkl=2021.4\n  - scipy\n")
    assert troubled.environment is None
    assert len(troubled.problems) == 3
    assert "dependencies[5]" in troubled.problems[0] and "CUDA toolkit" in troubled.problems[0]
    assert "conda-only" in troubled.problems[1]
    assert "not pinned" in troubled.problems[2]


def test_a_file_that_is_not_an_environment_says_so():
    assert from_environment_yml("dependencies: [unclosed").problems[0].startswith("environment.yml is not YAML")
    assert from_environment_yml("name: x\n").problems == ["environment.yml has no 'dependencies' list"]
    assert from_requirements_txt("# nothing\n").problems == ["it names no package"]
