"""The user's key cache: the API keys the clients minted, by service base URL, so a re-run mints
nothing (a service lets one IP mint 3 keys a day by default). One JSON file shared with the
JavaScript client and its ``ephemail-client`` command:

    $EPHEMAIL_KEY_CACHE, else $XDG_CACHE_HOME/ephemail/keys.json, else ~/.cache/ephemail/keys.json
    {"version": 1, "keys": {"<base URL>": {"api_key": "eph_…", "minted_at": "<ISO time>"}}}

The file is the user's alone (mode 600, its folder 700) and replaced whole on each write (a
temporary file renamed over it). ``EPHEMAIL_KEY_CACHE=off`` keeps no cache."""

from __future__ import annotations

import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

__all__ = ["KeyCache", "key_cache_path"]


def key_cache_path(env: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """The cache file, or None when ``EPHEMAIL_KEY_CACHE=off``."""
    env = os.environ if env is None else env
    named = env.get("EPHEMAIL_KEY_CACHE")
    if named == "off":
        return None
    if named:
        return Path(named)
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "ephemail" / "keys.json"


class KeyCache:
    """Keys by base URL in the file at ``path`` (``key_cache_path()`` by default; None: no cache)."""

    def __init__(self, path: Optional[Path] = None, *, default: bool = True) -> None:
        self.path = path if path is not None or not default else key_cache_path()

    def _load(self) -> Dict[str, Any]:
        assert self.path is not None
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {"version": 1, "keys": {}}
        if not isinstance(data, dict) or not isinstance(data.get("keys"), dict):
            return {"version": 1, "keys": {}}
        return data

    def _save(self, data: Dict[str, Any]) -> None:
        assert self.path is not None
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(data, indent=2) + "\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def get(self, base_url: str) -> Optional[str]:
        if self.path is None:
            return None
        entry = self._load()["keys"].get(base_url)
        key = entry.get("api_key") if isinstance(entry, dict) else None
        return key if isinstance(key, str) and key else None

    def set(self, base_url: str, api_key: str) -> None:
        if self.path is None:
            return
        data = self._load()
        data["keys"][base_url] = {"api_key": api_key, "minted_at": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")}
        self._save(data)

    def forget(self, base_url: str, api_key: str) -> None:
        if self.path is None:
            return
        data = self._load()
        entry = data["keys"].get(base_url)
        if isinstance(entry, dict) and entry.get("api_key") == api_key:
            del data["keys"][base_url]
            self._save(data)
