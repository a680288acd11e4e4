"""The lab itself: notebook parameters, the headless runner, and the steps the notebooks call.

Importing it (every notebook does) shows the lab's own warnings as plain lines in the cell's
output (``servelab.core.notices``).
"""

from servelab.core.notices import show_plainly

show_plainly()
