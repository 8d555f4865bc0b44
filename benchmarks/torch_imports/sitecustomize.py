"""Count the processes that import torch themselves (docs/performance.md).

Put this folder first on ``PYTHONPATH`` and set ``VQAROBUST_TORCH_IMPORTS`` to an empty
folder: every Python process of the run that imports torch (not one that inherits it
from a parent it was forked from) leaves a file named by its pid there.

    mkdir /tmp/torch-imports
    VQAROBUST_TORCH_IMPORTS=/tmp/torch-imports PYTHONPATH=benchmarks/torch_imports \\
        .venv/bin/snakemake
    ls /tmp/torch-imports | wc -l
"""

import os
import sys

_FOLDER = os.environ.get("VQAROBUST_TORCH_IMPORTS")


class _Witness:
    """A meta-path finder that finds nothing and notes the first ``import torch``."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torch" and _FOLDER:
            with open(os.path.join(_FOLDER, str(os.getpid())), "w") as out:
                out.write(" ".join(sys.argv)[:500])
        return None


if _FOLDER:
    sys.meta_path.insert(0, _Witness())
