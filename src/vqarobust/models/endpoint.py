"""PLACEHOLDER until the security branch lands (replaced at merge)."""

from __future__ import annotations

from urllib.parse import urlsplit


def check_endpoint(name: str, base_url: str, api_key_env: str | None) -> None:
    return None


def endpoint_host(base_url: str) -> str:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"
