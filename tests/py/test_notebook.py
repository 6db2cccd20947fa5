"""The tutorial notebook (docs/tutorial.ipynb) executed from top to bottom in a Python kernel
(nbclient, ipykernel), the package imported from the source tree with build/'s library.

Its own asserts are the checks of what it shows: a model written in the notebook and its
ModelError's line, the fit's error against the simulation's truth, the CPU fit against the
device="auto" fit, dimoc's tensor fit against DIPY's.  Checked here: no cell raised, every
assert cell ran, the figure came out as a PNG, and the printed figures are those the notebook
computes.  Jupyter's and matplotlib's configuration and runtime files live in the test's own
folder."""
import os
import re

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from dmtest import check, finish, workdir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W = workdir("notebook")
for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter-config"), ("JUPYTER_DATA_DIR", "jupyter-data"),
                 ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"), ("IPYTHONDIR", "ipython"),
                 ("MPLCONFIGDIR", "matplotlib")):
    os.environ[var] = os.path.join(W, sub)
    os.makedirs(os.environ[var], exist_ok=True)
os.environ["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", "")
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # the kernel's debugger: no note on frozen modules

nb = nbformat.read(os.path.join(ROOT, "docs", "tutorial.ipynb"), as_version=4)
client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": W}})
error = ""
try:
    client.execute()
except CellExecutionError as e:
    error = str(e)[-1500:]
check("notebook-runs-to-the-end", not error, error)

code = [c for c in nb.cells if c.cell_type == "code"]
ran = [c for c in code if c.get("execution_count")]
check("notebook-every-cell-ran", len(ran) == len(code), f"{len(ran)} of {len(code)} code cells ran")
asserting = [c for c in code if "assert " in c.source]
check("notebook-assert-cells-ran", len(asserting) >= 4 and all(c.get("execution_count") for c in asserting),
      f"{len(asserting)} cells with asserts")
text = "\n".join(o.get("text", "") for c in code for o in c.get("outputs", []) if o.get("output_type") == "stream")
pngs = [o for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
check("notebook-figure-drawn", len(pngs) == 1, f"{len(pngs)} PNG outputs")
m = re.search(r"f: median \|error\| ([0-9.]+); stick axis: median error ([0-9.]+) deg", text)
check("notebook-fit-against-truth", m is not None and float(m.group(1)) < 0.03 and float(m.group(2)) < 3,
      m.group(0) if m else text[-500:])
m = re.search(r"largest \|FA difference\| ([0-9.e+-]+), largest \|MD difference\| ([0-9.e+-]+)", text)
check("notebook-dti-against-dipy", m is not None and float(m.group(1)) < 1e-4 and float(m.group(2)) < 1e-7,
      m.group(0) if m else text[-500:])
check("notebook-model-error-line", "\n15 " in "\n" + text, text[:300])
finish()
