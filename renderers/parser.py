"""The one Markdown parser configuration every renderer reads model Markdown with.

CommonMark without raw HTML, plus tables and strikethrough: the card renderers
(``renderers.markdown``) and the link check for plain text (``renderers.links``)
must agree on what is a link, so they share this instance.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
