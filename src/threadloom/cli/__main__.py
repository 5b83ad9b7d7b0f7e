"""``python -m threadloom.cli``: the ``threadloom`` command."""

from threadloom.cli import entrypoint

entrypoint()
