"""``srn.load_kernels`` compiles every kernel a large chain would, before a solve needs it.

Issue #24, item 4: a first 193,131-state ``POST /srn/solve`` on a fresh machine got 422
after 10 s, its time limit spent compiling the kernels of large chains, which the
service's start-up never ran (``benchmarks/first_start.py`` measures it).  The check runs
in a fresh interpreter, so that kernels compiled by other tests cannot pass it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import srn
import srn.reachability
import srn.stationary

CHECK = """
import importlib, json, pkgutil
import srn
from numba.core.registry import CPUDispatcher
srn.load_kernels()
missing = []
for info in pkgutil.iter_modules(srn.__path__):
    module = importlib.import_module("srn." + info.name)
    for name, obj in vars(module).items():
        # Called from Python: public names.  Private ones are compiled into their callers.
        if isinstance(obj, CPUDispatcher) and obj.__module__ == module.__name__:
            if not name.startswith("_") and not obj.signatures:
                missing.append(module.__name__ + "." + name)
print(json.dumps(missing))
"""


def test_every_kernel_called_from_python_is_compiled() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=600, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_thresholds_of_large_chains_are_restored() -> None:
    before = (
        srn.reachability._COMPILED_FROM_STATES,
        srn.stationary._COMPILED_CONNECTIVITY_FROM,
        srn.stationary._THREADED_FROM,
    )
    assert srn.load_kernels() > 0
    after = (
        srn.reachability._COMPILED_FROM_STATES,
        srn.stationary._COMPILED_CONNECTIVITY_FROM,
        srn.stationary._THREADED_FROM,
    )
    assert after == before == (50_000, 100_000, 200_000)
