import os
import shutil
import sys
from pathlib import Path

# Triton kernels run on the CPU through the interpreter; it must be chosen before any kernel
# module is imported, whichever test imports one first. A machine with a GPU runs them natively.
if "TRITON_INTERPRET" not in os.environ and shutil.which("nvidia-smi") is None:
    os.environ["TRITON_INTERPRET"] = "1"

ROOT = Path(__file__).resolve().parent.parent
# Tests import helpers from this folder (``expectations``) and run against the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent))
