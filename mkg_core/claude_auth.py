"""The Claude subscription token, for Anthropic models when no explicit Anthropic credential is set.

Looked up in the platform's credential store first (the macOS keychain; on Linux, Claude Code's
credentials file and then the Secret Service through ``secret-tool``), then in
``CLAUDE_CODE_OAUTH_TOKEN`` (what ``claude setup-token`` prints, for headless machines). A token is
used only when it looks like one (``sk-ant-oat…`` or a JWT) and has not expired.
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .settings import secret

if TYPE_CHECKING:
    from .settings import Settings

SERVICE = "Claude Code-credentials"
EXPLICIT_ANTHROPIC_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
#: A token expiring within this many seconds counts as expired.
EXPIRY_MARGIN = 60
STORE_TIMEOUT = 5.0


@dataclass(frozen=True)
class Token:
    value: str
    source: str
    expires_at: float | None = None

    def __repr__(self) -> str:  # never print the token
        return f"Token(source={self.source!r}, expires_at={self.expires_at!r})"


def find_token(settings: Settings, *, environ: dict[str, str] | None = None) -> Token | None:
    """The first usable subscription token: platform store, then ``CLAUDE_CODE_OAUTH_TOKEN``."""
    env = os.environ if environ is None else environ
    for source, payload in _store_payloads(env):
        token = parse_payload(payload, source)
        if token is not None:
            return token
    value = secret(settings.claude_code_oauth_token)
    if value:
        return parse_payload(value, "CLAUDE_CODE_OAUTH_TOKEN")
    return None


def parse_payload(payload: str, source: str, *, now: float | None = None) -> Token | None:
    """A token from a stored payload (Claude Code's JSON, or a bare token), if usable now."""
    text = payload.strip()
    expires_at: float | None = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return None
        oauth = data.get("claudeAiOauth") if isinstance(data, dict) else None
        if not isinstance(oauth, dict) or not isinstance(oauth.get("accessToken"), str):
            return None
        text = oauth["accessToken"].strip()
        raw_expiry = oauth.get("expiresAt")
        if isinstance(raw_expiry, (int, float)):
            expires_at = raw_expiry / 1000 if raw_expiry > 1e10 else float(raw_expiry)
    if text.lower().startswith("bearer "):
        text = text[7:].strip()
    is_jwt = text.count(".") == 2
    if not (text.startswith("sk-ant-oat") or is_jwt):
        return None
    if expires_at is None and is_jwt:
        expires_at = _jwt_expiry(text)
    current = time.time() if now is None else now
    if expires_at is not None and expires_at + EXPIRY_MARGIN < current:
        return None
    return Token(text, source, expires_at)


def _jwt_expiry(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, json.JSONDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) else None


def _store_payloads(env: os._Environ[str] | dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if sys.platform == "darwin":
        user = env.get("USER") or getpass.getuser()
        for extra in (["-a", user], []):
            value = _run(["security", "find-generic-password", "-s", SERVICE, *extra, "-w"])
            if value:
                found.append(("macOS keychain", value))
                break
        return found
    config = env.get("CLAUDE_CONFIG_DIR") or str(Path(env.get("HOME") or Path.home()) / ".claude")
    path = Path(config) / ".credentials.json"
    try:
        found.append((f"Claude Code login ({path})", path.read_text(encoding="utf-8")))
    except OSError:
        pass
    if shutil.which("secret-tool", path=env.get("PATH")):
        user = env.get("USER") or getpass.getuser()
        value = _run(["secret-tool", "lookup", "service", SERVICE, "account", user])
        if value:
            found.append(("Secret Service", value))
    return found


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=STORE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None
