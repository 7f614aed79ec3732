"""The ``sync-lint`` command and ``python -m sync_lint``: ``cli``'s command line, imported and run
inside ``compiled_methods``, so that the dataclasses a run makes (about 12 ms of compiling at each
start) reuse the methods an earlier run compiled."""

from __future__ import annotations

from sync_lint.compiled_methods import compiled_methods


def main(argv: list[str] | None = None) -> int:
    with compiled_methods("command"):
        from sync_lint import cli

        return cli.main(argv)
