"""Import circles inside the layer (``agent_memory``): none may exist.

``python -m tools.import_cycles`` prints each circle (a strongly connected component of two or
more modules of the import graph) and exits 1 when there is one; ``make lint`` runs it. Every
import counts: at the top of a module, inside a function, and under ``TYPE_CHECKING`` (a circle
hidden there is still two modules that each need the other; docs/design.md, "Import circles").
The graph is grimp's, which import-linter (the layers contract) builds on.
"""

from __future__ import annotations

import sys

import grimp


def circles(package: str = "agent_memory") -> list[list[str]]:
    """The import circles among ``package``'s modules, each sorted, largest first (Tarjan's
    strongly connected components, iterative)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in order:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[module] = min(low[module], order[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == order[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def main() -> int:
    """Print the circles; 1 when there is any."""
    found = circles()
    for circle in found:
        print("import circle: " + " <-> ".join(circle))
    if not found:
        print("no import circle in agent_memory")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
