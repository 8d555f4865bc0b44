"""How much disk and time a torch install takes, as docs/install.md's dependency notes state it.

    .venv/bin/python benchmarks/install_size.py venv torch==2.13.0
    .venv/bin/python benchmarks/install_size.py venv torch==2.14.1
    .venv/bin/python benchmarks/install_size.py pypi torch 2.13.0

``venv`` makes a new venv in a temporary folder, installs the requirements with this
machine's pip settings (on this project's machines pip reads a local wheel folder first:
``torch==2.13.0`` takes the CPU build there, ``torch==2.14.1`` the CUDA build), and prints
the wall time, the MiB (``du -sm``) the install added to the venv and the installed torch and
NVIDIA packages. ``pypi`` prints the size of PyPI's Linux x86_64 wheel of that version
for Python 3.11 (the CUDA build; its NVIDIA libraries are separate wheels).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MIB = 2**20


def folder_mb(path: Path) -> int:
    """Megabytes (MiB) of disk that ``path`` takes, as ``du -sm`` counts them."""
    out = subprocess.run(["du", "-sm", str(path)], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[0])


def venv_install(requirements: list[str]) -> dict[str, object]:
    """Install ``requirements`` into a new venv; its added size, wall time and packages."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        empty = folder_mb(venv)
        start = time.perf_counter()
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", *requirements], check=True)
        seconds = time.perf_counter() - start
        listed = subprocess.run(
            [str(venv / "bin" / "pip"), "list", "--format", "json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        packages = {p["name"]: p["version"] for p in json.loads(listed)}
        return {
            "requirements": requirements,
            "added_mb": folder_mb(venv) - empty,
            "seconds": round(seconds),
            "torch": packages.get("torch"),
            "nvidia_or_cuda_packages": sorted(
                n for n in packages if n.startswith(("nvidia-", "cuda-"))
            ),
        }


def pypi_wheel(name: str, version: str) -> dict[str, object]:
    """PyPI's Linux x86_64 CPython 3.11 wheel of ``name`` ``version``: file name and MiB."""
    with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as f:
        files = json.load(f)["releases"][version]
    (wheel,) = [
        f for f in files if "cp311-cp311-manylinux" in f["filename"] and "x86_64" in f["filename"]
    ]
    return {"file": wheel["filename"], "mib": round(wheel["size"] / MIB)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    venv = sub.add_parser("venv", help="install into a new venv and measure it")
    venv.add_argument("requirements", nargs="+")
    pypi = sub.add_parser("pypi", help="size of PyPI's Linux x86_64 wheel")
    pypi.add_argument("name")
    pypi.add_argument("version")
    args = parser.parse_args()
    if args.command == "venv":
        print(json.dumps(venv_install(args.requirements), indent=1))
    else:
        print(json.dumps(pypi_wheel(args.name, args.version), indent=1))


if __name__ == "__main__":
    main()
