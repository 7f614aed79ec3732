import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Tests import helpers from this folder (``expectations``) and run against the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent))
