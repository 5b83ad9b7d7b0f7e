"""``ServerSettings.from_env``: every ``THREADLOOM_*`` setting of the server is read in one
place, the stream's bounds (spec 09 §9.10, §9.2.4) included."""

from __future__ import annotations

import pytest

from threadloom.server.settings import ServerSettings, SettingsError, StreamSettings


def test_stream_bounds_come_from_the_environment() -> None:
    settings = ServerSettings.from_env(
        {
            "THREADLOOM_STREAM_BUFFER_FRAMES": "200",
            "THREADLOOM_STREAM_BUFFER_BYTES": "65536",
            "THREADLOOM_MAX_STREAMS_PER_PRINCIPAL": "3",
        }
    )
    assert settings.stream == StreamSettings(
        buffer_frames=200, buffer_bytes=65536, max_per_principal=3
    )
    assert ServerSettings.from_env({}).stream == StreamSettings()


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_stream_bound_that_is_not_a_positive_integer_is_refused(value: str) -> None:
    with pytest.raises(SettingsError, match="THREADLOOM_STREAM_BUFFER_FRAMES"):
        ServerSettings.from_env({"THREADLOOM_STREAM_BUFFER_FRAMES": value})


def test_the_mcp_progress_interval_comes_from_the_environment() -> None:
    """Spec 13 §13.5 rule 5: ``THREADLOOM_MCP_PROGRESS_SECONDS`` (default 5), a positive
    number of seconds."""
    assert ServerSettings.from_env({}).mcp_progress_s == 5.0
    given = {"THREADLOOM_MCP_PROGRESS_SECONDS": "0.5"}
    assert ServerSettings.from_env(given).mcp_progress_s == 0.5
    for value in ("0", "-1", "soon"):
        with pytest.raises(SettingsError, match="THREADLOOM_MCP_PROGRESS_SECONDS"):
            ServerSettings.from_env({"THREADLOOM_MCP_PROGRESS_SECONDS": value})
