"""The deploy tests: the container image, compose.yaml, the package and the systemd unit."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "deploy: builds or checks what is deployed (image, compose, package, unit)"
    )
