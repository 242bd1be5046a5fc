"""Drawing: matplotlib functions that draw records onto a given Axes, the figure style and the PNG frames."""
