"""Shared analysis facts: computed at most once per file, on demand, and used by several rules.

- ``context``: the per-file context rules receive, with a cache of analyses.
- ``names``: the import alias table (dotted names without libcst's scope metadata).
- ``summaries``: per-function facts exported to other files, and calls resolved project-wide.
"""
