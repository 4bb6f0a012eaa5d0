"""The PNG writer every picture goes through (plots/style.save_figure): it lays a figure out once
and draws it once, where `savefig` alone draws it twice; the file must be the one `savefig` writes."""

from __future__ import annotations

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.patches import Patch

from disagg_simpy.plots import style as st


def _figure():
    """A small figure whose constrained layout moves things: a two-line suptitle, long tick labels,
    a colorbar and a legend outside the axes."""
    with st.style():
        fig = st.new_figure(6, 3)
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[1, 2])
        top.plot(np.arange(10), np.arange(10) ** 2)
        bottom.set_yticks([0, 1, 2])
        bottom.set_yticklabels(["#1 GPU 0→3  ✓ on time", "#2 GPU 1  ✗ first word 2.1 s", "#3"], fontsize=8)
        fig.suptitle("same-gpu, seed 1: 93% of 1,234 measured replies on time\none GPU", fontweight="bold")
        fig.colorbar(ScalarMappable(norm=Normalize(0, 512), cmap=st.read_cmap()), ax=top, label="tokens")
        fig.legend(handles=[Patch(facecolor=st.WRITE_COLOUR, label="writes")], loc="outside right lower")
        return fig


def test_save_figure_writes_the_bytes_savefig_writes(tmp_path):
    """At 100 dpi (describe's and fit's pictures), on a figure made at DPI (110): the layout must be
    made at the dpi the picture is drawn at, as savefig does."""
    with st.style():
        st.save_figure(_figure(), tmp_path / "ours.png", dpi=100)
        _figure().savefig(tmp_path / "savefig.png", format="png", dpi=100)
    ours = (tmp_path / "ours.png").read_bytes()
    assert ours.startswith(b"\x89PNG") and ours == (tmp_path / "savefig.png").read_bytes()
