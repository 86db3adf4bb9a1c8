"""The one exception users see for bad configs and inputs."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value, file or input is wrong; the message names what and where."""
