"""The Python package's pytest suite (tests/pytest: its contract against closed forms), run by
pytest and reported here one PASS or FAIL line per pytest test, as tests/run.sh counts them."""
import os
import re
import subprocess
import sys

from dmtest import PYTHON_SOURCE, check, finish

SUITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pytest")
p = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-q", "-p", "no:cacheprovider", SUITE],
                   capture_output=True, text=True, cwd=SUITE,
                   env=dict(os.environ, PYTHONPATH=PYTHON_SOURCE, PYTHONDONTWRITEBYTECODE="1"))
outcomes = re.findall(r"^(PASSED|FAILED|ERROR) (\S+)", p.stdout, re.M)
for outcome, test in outcomes:
    check(f"pytest-{test.split('::', 1)[-1]}", outcome == "PASSED",
          p.stdout[-2000:] if outcome != "PASSED" else "")
check("pytest-suite-ran", p.returncode == 0 and len(outcomes) >= 10,
      f"exit {p.returncode}, {len(outcomes)} tests; {p.stdout[-1500:]} {p.stderr[-1500:]}")
finish()
