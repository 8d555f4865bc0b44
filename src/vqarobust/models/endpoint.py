"""Where a served model's requests go, and with which key: checked before any request.

A served entry (family ``openai-chat``) names its server (``base_url``) and the
environment variable holding its API key (``api_key_env``). :func:`check_endpoint`
refuses what would leak a secret:

* ``api_key_env`` must be named like an API key (:data:`API_KEY_ENV`: ``OPENAI_API_KEY``,
  ``VLLM_API_KEY``, ``API_KEY``), so that an entry cannot send another secret of the
  job's environment (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``) to a server as a bearer
  token;
* a key travels over plain ``http://`` only to this machine (a loopback host:
  127.0.0.0/8, ``::1``, ``localhost``); elsewhere it needs ``https://``;
* ``base_url`` carries no credentials: no ``user:password@``, no query string (where
  keys and tokens ride, e.g. ``?api_key=``), no fragment, since the URL reaches logs,
  error messages and the fingerprint. A message names the part, never its value.

:func:`endpoint_host` is the URL without any of that, as the fingerprint keeps it.
The config validation calls :func:`check_endpoint` (:mod:`vqarobust.config`), and so
does the served family when it is built. This module imports nothing of the package:
the served family's code digest stays its own.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, urlsplit

# The names an API key's environment variable may have (docs/models.md, "Served models"):
# upper case, ending in API_KEY.
API_KEY_ENV = re.compile(r"(?:[A-Z][A-Z0-9_]*_)?API_KEY")
# Query parameter names that carry a credential, for a message that says so.
_CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|auth|sig|credential|session", re.I)
DEFAULT_PORTS = {"http": 80, "https": 443}


class EndpointError(ValueError):
    """A served entry's ``base_url`` or ``api_key_env`` that is refused; ``key`` names
    which, and the message starts ``models.<name>.<key>:`` and holds no secret."""

    def __init__(self, name: str, key: str, reason: str) -> None:
        super().__init__(f"models.{name}.{key}: {reason}")
        self.key = key


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 without brackets) is this machine:
    ``localhost``, 127.0.0.0/8 or ``::1`` (also as an IPv4-mapped address)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _credentials_reason(base_url: str) -> str | None:
    """Why ``base_url`` is refused as a carrier of credentials, without its values."""
    parts = urlsplit(base_url)
    if "@" in parts.netloc:
        return (
            "holds credentials before its host (user:password@); they would reach "
            "logs and error messages: give the key through api_key_env"
        )
    if parts.query:
        names = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)})
        carried = [k for k in names if _CREDENTIAL_NAME.search(k)]
        what = (
            f"a credential in its query string (parameter {', '.join(map(repr, carried))})"
            if carried
            else "a query string"
        )
        return (
            f"holds {what}; the URL reaches logs, error messages and the fingerprint: "
            "give the API root without one, and the key through api_key_env"
        )
    if parts.fragment:
        return "holds a fragment (#...); give the API root without one"
    return None


def check_endpoint(name: str, base_url: str, api_key_env: str | None) -> None:
    """A served entry's server and key variable that leak no secret (the module's
    rules); else :class:`EndpointError` naming ``models.<name>.base_url`` or
    ``models.<name>.api_key_env``. The variable's value is never read here."""
    parts = urlsplit(base_url)
    if parts.scheme not in DEFAULT_PORTS:
        raise EndpointError(name, "base_url", "must start with http:// or https://")
    reason = _credentials_reason(base_url)
    if reason is not None:
        raise EndpointError(name, "base_url", reason)
    if not parts.hostname:
        raise EndpointError(name, "base_url", "names no host")
    try:
        parts.port  # noqa: B018 (urlsplit checks the port when it is read)
    except ValueError:
        raise EndpointError(name, "base_url", "has a port that is not a number 0-65535") from None
    if api_key_env is None:
        return
    if not API_KEY_ENV.fullmatch(api_key_env):
        raise EndpointError(
            name,
            "api_key_env",
            f"{api_key_env!r} is not named like an API key: the variable's name must end "
            "in API_KEY, in upper case (e.g. OPENAI_API_KEY, VLLM_API_KEY), so that no other "
            "secret of the job's environment is sent to a server",
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise EndpointError(
            name,
            "base_url",
            f"sends the API key ({api_key_env}) over plain http to {parts.hostname}, which is "
            "not this machine; use https://, or http:// to a loopback host (127.0.0.1, ::1, "
            "localhost, e.g. through an SSH tunnel)",
        )


def endpoint_host(base_url: str) -> str:
    """``scheme://host:port/path`` of ``base_url``: scheme and host in lower case, the
    port always written (80 or 443 by default), the path without its trailing slash,
    and no credentials, query or fragment. Two spellings of one server give one string
    (``http://Node/v1/`` and ``http://node:80/v1``)."""
    parts = urlsplit(base_url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or DEFAULT_PORTS.get(scheme)
    path = parts.path.rstrip("/")
    return f"{scheme}://{host}{f':{port}' if port else ''}{path}"
