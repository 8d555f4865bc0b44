"""A Hugging Face Hub of one's own on 127.0.0.1, for tests that download weights.

The real Hub is out of reach here, so tests that must see weights resolved *during* a job
(a download into an empty cache, a branch that moved) point ``huggingface_hub`` at this
server. It speaks the part of the Hub's HTTP interface that ``snapshot_download`` uses:
``/api/models/<repo>/revision/<rev>`` (the commit a branch points at),
``/api/models/<repo>/tree/<commit>`` (the file list) and ``/<repo>/resolve/<rev>/<file>``
(HEAD for the metadata headers, GET for the bytes). Each published folder is one commit;
publishing again moves the branch.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest


@dataclass
class _Repo:
    refs: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Path] = field(default_factory=dict)


@dataclass
class HubServer:
    """Repositories by id; ``url`` once started; ``requests`` counts what was asked."""

    repos: dict[str, _Repo] = field(default_factory=dict)
    url: str = ""
    requests: list[str] = field(default_factory=list)

    def publish(self, repo_id: str, folder: Path, branch: str = "main") -> str:
        """Make ``folder``'s files a commit of ``repo_id`` and point ``branch`` at it;
        returns the commit (a SHA-1 of the files, as git's are 40 hex digits)."""
        h = hashlib.sha1()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
        commit = h.hexdigest()
        repo = self.repos.setdefault(repo_id, _Repo())
        repo.commits[commit] = folder
        repo.refs[branch] = commit
        return commit

    def _commit(self, repo_id: str, revision: str) -> str | None:
        repo = self.repos.get(repo_id)
        if repo is None:
            return None
        if revision in repo.commits:
            return revision
        return repo.refs.get(revision)


_API = re.compile(r"^/api/models/([^/]+/[^/]+)/(revision|tree)/([^/]+)(/.*)?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def _handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for k, v in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _not_found(self, what: str) -> None:
            body = json.dumps({"error": what}).encode()
            self._send(
                404, body, {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"}
            )

        def _route(self) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.requests.append(f"{self.command} {path}")
            if m := _API.match(path):
                repo_id, kind, revision = m.group(1), m.group(2), m.group(3)
                commit = hub._commit(repo_id, revision)
                if commit is None:
                    return self._not_found(f"{repo_id}@{revision}")
                folder = hub.repos[repo_id].commits[commit]
                files = sorted(p for p in folder.rglob("*") if p.is_file())
                if kind == "revision":
                    data: object = {
                        "id": repo_id,
                        "sha": commit,
                        "private": False,
                        "siblings": [
                            {"rfilename": p.relative_to(folder).as_posix()} for p in files
                        ],
                    }
                else:
                    data = [
                        {
                            "type": "file",
                            "path": p.relative_to(folder).as_posix(),
                            "size": p.stat().st_size,
                            "oid": hashlib.sha1(p.read_bytes()).hexdigest(),
                        }
                        for p in files
                    ]
                return self._send(
                    200, json.dumps(data).encode(), {"Content-Type": "application/json"}
                )
            if m := _RESOLVE.match(path):
                repo_id, revision, name = m.groups()
                commit = hub._commit(repo_id, revision)
                file = None if commit is None else hub.repos[repo_id].commits[commit] / name
                if file is None or not file.is_file():
                    return self._not_found(f"{repo_id}@{revision}/{name}")
                body = file.read_bytes()
                etag = f'"{hashlib.sha256(body).hexdigest()}"'
                headers = {
                    "X-Repo-Commit": commit,
                    "ETag": etag,
                    "Content-Type": "application/octet-stream",
                }
                return self._send(200, body, headers)
            return self._not_found(path)

        do_GET = do_HEAD = _route

    return Handler


@contextmanager
def serve(hub: HubServer) -> Iterator[HubServer]:
    """Run ``hub`` on a free port of 127.0.0.1 for the ``with`` block; sets ``hub.url``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()


def point_at(monkeypatch: pytest.MonkeyPatch, url: str, cache: Path) -> None:
    """Send this process's ``huggingface_hub`` to ``url`` with ``cache`` as its Hub cache
    (both are read from the environment at import, so the module constants are set)."""
    import huggingface_hub.constants as hc

    for name, value in (
        ("HF_ENDPOINT", url),
        ("HF_HUB_CACHE", str(cache)),
        ("HF_HUB_OFFLINE", "0"),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(hc, "ENDPOINT", url)
    monkeypatch.setattr(
        hc, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
