"""Import matplotlib whatever `MPLBACKEND` says (imported first by the package).

Our figures are bare `Figure`s rendered by Agg and never shown, so the backend a user chose for
windows does not matter to them; but matplotlib refuses to import at all under a backend name
it does not know (`MPLBACKEND=nonsense`). Then it is imported without that variable, which is
put back for anything else; a valid choice (a notebook's inline backend) is left alone.
"""

from __future__ import annotations

import os
import sys

try:
    import matplotlib
except ValueError:  # "Key backend: 'nonsense' is not a valid value for backend"
    for _name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        del sys.modules[_name]  # the half-imported package, so that it imports afresh
    _chosen = os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib
    finally:
        if _chosen is not None:
            os.environ["MPLBACKEND"] = _chosen

__all__ = ["matplotlib"]
