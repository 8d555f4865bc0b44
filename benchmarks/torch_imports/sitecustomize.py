"""Count the processes that import torch themselves (docs/performance.md).

Put this folder first on ``PYTHONPATH`` and set ``VQAROBUST_TORCH_IMPORTS`` to an empty
folder: every Python process of the run that executes torch's ``__init__`` (not one
that inherits torch from a parent it was forked from, nor one that only asks whether
torch is installed, as polars does) leaves a file named by its pid there.

    mkdir /tmp/torch-imports
    VQAROBUST_TORCH_IMPORTS=/tmp/torch-imports PYTHONPATH=benchmarks/torch_imports \\
        .venv/bin/snakemake
    ls /tmp/torch-imports | wc -l
"""

import importlib.machinery
import os
import sys

_FOLDER = os.environ.get("VQAROBUST_TORCH_IMPORTS")


class _Recording:
    """torch's own loader, noting the process when it runs torch's ``__init__``."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        with open(os.path.join(_FOLDER, str(os.getpid())), "w") as out:
            out.write(" ".join(sys.argv)[:500])
        return self._inner.exec_module(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Witness:
    """A meta-path finder that finds torch as the path finder does, with its loader
    wrapped; every other name it leaves to the finders after it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Recording(spec.loader)
        return spec


if _FOLDER:
    sys.meta_path.insert(0, _Witness())
