"""Cost of resume-by-content: SHA-256 throughput of the digests every inference job
computes (weights, questions, image shards), on a file of random bytes.

    .venv/bin/python benchmarks/digests.py --mb 1024

Prints MB/s and the seconds one job would spend on a given checkpoint size (docs/models.md).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from vqarobust.digests import tree_sha256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="size of the file to hash")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "shards"
        folder.mkdir()
        chunk = os.urandom(1 << 20)
        for part in range(4):  # four shard files, as an image folder holds
            with open(folder / f"part-{part:05d}.parquet", "wb") as fh:
                for _ in range(args.mb // 4):
                    fh.write(chunk)
        tree_sha256(folder)  # warm the page cache: jobs read files the OS just wrote
        t = time.perf_counter()
        tree_sha256(folder)
        dt = time.perf_counter() - t
    rate = args.mb / dt
    print(f"SHA-256 of {args.mb} MB in 4 files: {dt:.2f} s ({rate:.0f} MB/s, page cache warm)")
    for name, gb in (("ViLT-B/32", 0.47), ("BLIP-base", 1.5), ("LLaVA-1.5-13B", 26.1)):
        print(f"  a local {name} checkpoint ({gb} GB): {gb * 1024 / rate:.1f} s per job")


if __name__ == "__main__":
    main()
