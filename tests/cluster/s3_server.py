"""moto's S3 server (moto[server]) on a free port of 127.0.0.1, for the tests that put the
workflow's files on S3, and the Snakemake options that point the S3 storage plugin at it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KEYS = {"access": "testing", "secret": "testing"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def s3_server(log: Path, *buckets: str) -> Iterator[str]:
    """A running moto S3 server holding ``buckets`` (empty), its request log written to
    ``log`` (a pipe nobody reads would fill and stall the server); its URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"moto_server did not start: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        for bucket in buckets:
            client(url).create_bucket(Bucket=bucket)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def client(url: str) -> Any:
    """A boto3 S3 client of the server at ``url``."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=KEYS["access"],
        aws_secret_access_key=KEYS["secret"],
    )


def storage_args(url: str, prefix: str | None = None) -> list[str]:
    """The Snakemake options of the S3 plugin for the server at ``url`` (and, given, the
    default storage prefix ``s3://bucket/path``)."""
    args = [] if prefix is None else ["--default-storage-provider", "s3"]
    args += ["--default-storage-prefix", prefix] if prefix else []
    return [
        *args,
        "--storage-s3-endpoint-url",
        url,
        "--storage-s3-access-key",
        KEYS["access"],
        "--storage-s3-secret-key",
        KEYS["secret"],
    ]
