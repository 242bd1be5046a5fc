"""Sphinx settings of the book site (`make site`): the pages are the committed notebooks, never re-executed.

site/build.py copies this file beside the notebooks it prepares; LAB_SITE_HUB, when set, adds a JupyterHub launch
button (through nbgitpuller) to the Binder and Colab ones."""
import os
from importlib import metadata

from widgets.lab.hosts import DISTRIBUTION, REPOSITORY

project = "Gradient Accumulation Lab"
author = "The Gradient Accumulation Lab authors"
copyright = "the Gradient Accumulation Lab authors: code MIT, prose and figures CC BY 4.0"
extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_build"]

# nbval proves the committed outputs; the site shows exactly those.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 6  # the ids build.py points a link to a heading at
# The mistakes tables (developer_1, developer_3) are markdown outputs whose links point at targets (build.py)
nb_render_markdown_format = "myst"

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_show_sourcelink = False
html_theme_options = {
    "repository_url": f"https://github.com/{REPOSITORY}",
    # The launch buttons open the notebooks of this lab's release, as the notebooks' own badges do.
    "repository_branch": f"v{metadata.version(DISTRIBUTION)}",
    "path_to_docs": "notebooks",
    "use_repository_button": True,
    "launch_buttons": {
        "notebook_interface": "jupyterlab",
        "binderhub_url": "https://mybinder.org",
        "colab_url": "https://colab.research.google.com",
        "jupyterhub_url": os.environ.get("LAB_SITE_HUB", ""),
    },
}
