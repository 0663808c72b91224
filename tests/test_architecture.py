"""No import cycle anywhere in the product code, imports inside functions included.

import-linter's contracts (`make lint`) check the layers and the cycles between sibling packages.
This test looks at every module of the product: a cycle inside one package, or one hidden by a
function-level import, fails here with the chain of imports that closes it.
"""
import textwrap

import grimp

PRODUCT_PACKAGES = ("runs", "leaderboard", "sandbox", "autoexperiment_site")


def import_cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected components of more than one module. A module's component is what it
    imports, directly or not, that also imports it."""
    cycles: list[set[str]] = []
    seen: set[str] = set()
    for module in sorted(graph.modules):
        if module in seen:
            continue
        component = (graph.find_upstream_modules(module) & graph.find_downstream_modules(module)) | {module}
        seen |= component
        if len(component) > 1:
            cycles.append(component)
    return cycles


def describe_cycle(graph: grimp.ImportGraph, component: set[str]) -> str:
    """One cycle through `component`, hop by hop with the import statements that make it."""
    start = min(component)
    following = min(graph.find_modules_directly_imported_by(start) & component)
    chain = (start, *graph.find_shortest_chain(importer=following, imported=start))
    hops = [start]
    for importer, imported in zip(chain, chain[1:]):
        details = graph.get_import_details(importer=importer, imported=imported)
        lines = "; ".join(f"line {detail['line_number']}: {detail['line_contents']}" for detail in details)
        hops.append(f"{imported}    [{importer}, {lines}]")
    return f"{len(component)} modules ({', '.join(sorted(component))}):\n    " + "\n    -> ".join(hops)


def test_no_import_cycles_in_product_code():
    graph = grimp.build_graph(*PRODUCT_PACKAGES, cache_dir=None)
    cycles = import_cycles(graph)
    assert not cycles, "import cycles in the product code:\n" + "\n".join(
        describe_cycle(graph, component) for component in cycles
    )


def test_a_cycle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text(textwrap.dedent("""
        def late():
            from cyclic import a
            return a
    """))
    monkeypatch.syspath_prepend(tmp_path)

    graph = grimp.build_graph("cyclic", cache_dir=None)

    assert import_cycles(graph) == [{"cyclic.a", "cyclic.b"}]
    assert describe_cycle(graph, {"cyclic.a", "cyclic.b"}).endswith("-> cyclic.a    [cyclic.b, line 3: from cyclic import a]")
