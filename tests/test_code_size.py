"""No product module over about 700 lines and no function over about 60 (issue 35), except those named
below with the reason they are left longer. scripts/code_size.py prints the same lists."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES = 700
FUNCTION_LINES = 60

# name -> why it stays longer. A name here that is no longer long fails too, so the list stays true.
LEFT_LONGER: dict[str, str] = {
}


def _code_size():
    spec = importlib.util.spec_from_file_location("code_size", ROOT / "scripts" / "code_size.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("code_size", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_no_module_or_function_is_longer_than_a_reader_takes_in_unless_named_with_its_reason():
    modules, functions = _code_size().lengths(ROOT)
    too_long = {m.name: m.lines for m in modules if m.lines > MODULE_LINES}
    too_long |= {f.name: f.lines for f in functions if f.lines > FUNCTION_LINES}
    unexplained = {name: lines for name, lines in too_long.items() if name not in LEFT_LONGER}
    assert unexplained == {}, f"split these (or name them in LEFT_LONGER with the reason): {unexplained}"
    no_longer_long = sorted(set(LEFT_LONGER) - set(too_long))
    assert no_longer_long == [], f"no longer long, remove them from LEFT_LONGER: {no_longer_long}"


def test_the_measure_counts_a_function_from_its_def_to_its_last_line(tmp_path):
    package = tmp_path / "runs"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    (package / "long.py").write_text(f"class A:\n    def f(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n")
    for other in ("autoexperiment_site", "leaderboard", "sandbox", "runs/migrations"):
        (tmp_path / other).mkdir(exist_ok=True)
    (tmp_path / "runs" / "migrations" / "0001_big.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    modules, functions = _code_size().lengths(tmp_path)
    assert [m.name for m in modules] == ["runs/long.py"]  # migrations are not the product's prose
    assert functions[0].name == "runs/long.py::A.f" and functions[0].lines == FUNCTION_LINES + 1
