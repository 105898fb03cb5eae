"""No public name is both a function and a module: `batchor.plan` is the planning package, callable
as `batchor.api.plan`, and `batchor.quality.diff` is only the function (its module is `compare`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_planning_module_imports_under_its_dotted_name_beside_the_callable_plan():
    code = (
        "import batchor\n"
        "import batchor.plan.compile as c\n"
        "import batchor.quality.compare as q\n"
        "from batchor import plan, diff\n"
        "assert callable(c.compile_plan) and callable(q.diff_sources)\n"
        "assert plan is batchor.plan and callable(plan)\n"
        "import batchor.quality\n"
        "assert batchor.quality.diff is diff and callable(diff) and not hasattr(diff, '__path__')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_calling_the_plan_package_plans(workdir):
    import batchor
    from tests.conftest import make_spec

    compiled = batchor.plan(make_spec(workdir, rows=5), mock=True, save=False)
    assert compiled.header.totals.rows == 5
