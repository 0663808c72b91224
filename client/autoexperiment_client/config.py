"""Where the client finds the server's URL and the API token.

URL: --url, else AUTOEXPERIMENT_URL, else the config file's `url`.
Token: AUTOEXPERIMENT_TOKEN, else the config file's `token`. There is no --token option on purpose:
a command line is visible to every user of the machine (ps, /proc) and stays in shell history.

The config file is AUTOEXPERIMENT_CONFIG if set, else $XDG_CONFIG_HOME/autoexperiment/config.toml
(~/.config/autoexperiment/config.toml):

    url = "https://autoexperiment.example.org"
    token = "aex_..."

A file holding a token must be readable by its owner alone (chmod 600), as ssh insists for its keys:
a token other users can read is refused, with the command that fixes it.
"""
from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "AUTOEXPERIMENT_TOKEN"
URL_ENV = "AUTOEXPERIMENT_URL"
CONFIG_ENV = "AUTOEXPERIMENT_CONFIG"


class ConfigError(Exception):
    """A setting missing or unsafe; the message says what to do."""


@dataclass(frozen=True)
class Settings:
    url: str
    token: str | None


def config_path() -> Path:
    if explicit := os.environ.get(CONFIG_ENV):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "autoexperiment" / "config.toml"


def _read_config(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            values = tomllib.load(handle)
            mode = os.fstat(handle.fileno()).st_mode
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    for key in ("url", "token"):
        if key in values and not isinstance(values[key], str):
            raise ConfigError(f"{path}: {key} must be a string, got {type(values[key]).__name__}")
    if values.get("token") and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{path} holds a token but other users can read it (mode {stat.S_IMODE(mode):o}): "
            f"run `chmod 600 {path}`, or set {TOKEN_ENV} instead"
        )
    return values


def settings_load(*, url: str | None = None, need_token: bool = True) -> Settings:
    """The URL and token to use; raises ConfigError naming what is missing and where it may be set."""
    env_token = os.environ.get(TOKEN_ENV, "").strip()
    env_url = os.environ.get(URL_ENV, "").strip()
    path = config_path()
    # The file is read (and its mode checked) only when it is needed for something.
    file_values = {} if (env_token or not need_token) and (url or env_url) else _read_config(path)
    resolved_url = (url or env_url or file_values.get("url", "")).strip()
    token = env_token or (file_values.get("token") or "").strip() or None
    if not resolved_url:
        raise ConfigError(f"no server URL: pass --url, set {URL_ENV}, or put url = \"...\" in {path}")
    if not resolved_url.startswith(("http://", "https://")):
        raise ConfigError(f"the server URL must start with http:// or https://, got {resolved_url!r}")
    if need_token and not token:
        raise ConfigError(
            f"no API token: set {TOKEN_ENV}, or put token = \"...\" in {path} (chmod 600); "
            "make one on the site's token page"
        )
    return Settings(url=resolved_url.rstrip("/"), token=token)
