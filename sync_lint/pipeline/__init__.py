"""The pipeline, one module per stage, in order:

discover -> source (read + decode) -> prefilter -> lint_file (parse once, shared analysis,
rules) -> project (cross-file summaries) -> suppress (noqa) -> report / fix.
``runner`` drives the stages over many files.
"""
