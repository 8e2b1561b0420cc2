"""`python -m cltoolkit`: the CLI, with the working folder taken off the module path first (Python puts it there
for `-m`), so that a `numpy.py` or `torch.py` lying in the folder a user runs from is never imported."""

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
    del sys.path[0]

from cltoolkit.cli import main

main()
