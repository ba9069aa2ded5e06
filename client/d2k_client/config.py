"""Where `d2k login` keeps a token per server: a JSON file in the user's config directory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

DEFAULT_SERVER = "http://127.0.0.1:8000"


class ClientError(Exception):
    """A problem the user can fix, reported as one line."""


def config_path() -> Path:
    """`$D2K_CONFIG` if set, else e.g. ~/.config/d2k/config.json."""
    override = os.environ.get("D2K_CONFIG")
    if override:
        return Path(override)
    return Path(platformdirs.user_config_dir("d2k", appauthor=False)) / "config.json"


def server_normalize(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"{url!r} is not a server address; give one like {DEFAULT_SERVER}")
    return url


@dataclass
class Config:
    default_server: str | None
    tokens: dict[str, str]

    @classmethod
    def load(cls) -> Config:
        path = config_path()
        if not path.is_file():
            return cls(default_server=None, tokens={})
        try:
            data = json.loads(path.read_text())
            return cls(
                default_server=data.get("default_server"),
                tokens={str(k): str(v["token"]) for k, v in data.get("servers", {}).items()},
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ClientError(f"cannot read {path}: {exc}; remove it and run d2k login") from exc

    def save(self) -> Path:
        path = config_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "default_server": self.default_server,
            "servers": {server: {"token": token} for server, token in sorted(self.tokens.items())},
        }
        # The token is a password: readable by its owner only, from the first byte on.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2)
        return path

    def server(self, explicit: str | None) -> str:
        """The server to talk to: --server / $D2K_SERVER, else the last login's."""
        return server_normalize(explicit or self.default_server or DEFAULT_SERVER)
