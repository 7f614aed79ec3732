"""sync-lint: finds layout casts relied on for contiguity and undeclared GPU->CPU syncs.

Importing this package must stay cheap and must never import torch or triton: the linter
reads code, it does not run it.
"""

__version__ = "0.1.0"

# Rule pages live in the repository (docs/rules/, generated from the rules).
DOCS_URL = "https://github.com/sync-lint/sync-lint/blob/main/docs/rules"
