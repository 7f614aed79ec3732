import os
import sys

# ``python -m sync_lint`` puts the working directory first on ``sys.path``, so that a checked
# project's own top-level modules (torch's source tree has a ``random.py`` and a ``signal/``)
# would stand in for the standard library's in every import that follows. This package is
# imported already; its modules are found through it.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from sync_lint.command import main  # after the path is made safe

sys.exit(main())
