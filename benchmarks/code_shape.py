"""The package's shape: module and function sizes, set beside the house style's reference figures
(conventions.md: median module 110-250 lines, median function 8-11, about three in four functions
20 lines or shorter).

    python benchmarks/code_shape.py [PACKAGE_DIR]

Lines are physical lines (blank lines and docstrings included); a function is every `def` and
`async def`, methods and nested functions included, from its `def` line to its last line.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shape(package: Path) -> dict[str, float]:
    modules, functions = [], []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        modules.append(len(text.splitlines()))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno or node.lineno) - node.lineno + 1)
    return {
        "modules": len(modules),
        "median_module_lines": statistics.median(modules),
        "modules_over_400": sum(1 for n in modules if n > 400),
        "functions": len(functions),
        "median_function_lines": statistics.median(functions),
        "share_functions_20_or_less": sum(1 for n in functions if n <= 20) / len(functions),
        "functions_over_40": sum(1 for n in functions if n > 40),
    }


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else ROOT / "batchor"
    for name, value in shape(package).items():
        print(f"{name:28} {value:.2f}" if isinstance(value, float) else f"{name:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
