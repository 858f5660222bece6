"""make test's grouping takes effect: under ``-n 2 --dist loadgroup`` the tests that share a
session's services or a module's fixture run on one worker, which sets that fixture up once.
It silently did not with pytest 9.2 (pytest-xdist#1386), nor when tests/conftest.py's hook ran
after pytest-xdist's: every group was spread over both workers, each starting its own stack."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

SHARED = """
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    with open(os.environ["SETUPS"], "a") as out:
        out.write(f"{os.getpid()}\\n")
    return os.getpid()

@pytest.mark.parametrize("n", range({count}))
def test_shares(shared, n):
    assert shared == os.getpid()
"""

ALONE = """
import pytest

@pytest.mark.parametrize("n", range({count}))
def test_alone(n):
    pass
"""


def test_tests_sharing_a_module_fixture_run_on_one_worker_which_sets_it_up_once(
    tmp_path: Path,
) -> None:
    rng = random.Random(59)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    modules = rng.randint(2, 4)
    for number in range(modules):
        (tests / f"test_shared_{number}.py").write_text(
            SHARED.replace("{count}", str(rng.randint(4, 9)))
        )
    (tests / "test_alone.py").write_text(ALONE.replace("{count}", str(rng.randint(4, 9))))
    repository = Path(__file__).resolve().parents[2]
    options = ["-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    places = ["--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "base")]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *options, *places, str(tests)],
        cwd=repository,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(repository), "SETUPS": str(tmp_path / "setups")},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    grouped = re.findall(r"PASSED \S*test_shared_(\d)\.py::test_shares\[\d\]@(\S+)", done.stdout)
    assert {module for module, _ in grouped} == {str(n) for n in range(modules)}, done.stdout
    assert all(group.endswith(f"test_shared_{module}.py") for module, group in grouped)
    setups = (tmp_path / "setups").read_text().split()
    assert len(setups) == modules, f"{len(setups)} setups of {modules} modules' fixtures"
