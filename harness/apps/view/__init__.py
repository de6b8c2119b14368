"""``harness view``: a local, read-only web viewer of a work folder's records.

Standard library only (``http.server``), no script, no build step. It reads the records through the one read
interface (:class:`harness.records.RecordReader`, the database opened read-only) and the tracking frames, and
renders an item as the HTML report does (``harness.apps.tracking.report``): it writes nothing to the work folder
and computes nothing of its own. docs/view.md.

- ``pages``: the pages (cycles, a cycle, an item, a cycle's trace, the plots, not found);
- ``server``: the HTTP server, its routes and headers (``make_server``);
- ``cli``: the ``harness view`` subcommand.
"""

from __future__ import annotations

__all__: list[str] = []  # import what you need from .server (make_server) or .pages: this package stays light
