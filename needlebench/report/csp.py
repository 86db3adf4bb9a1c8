"""The head of every page the package writes, with a Content-Security-Policy that allows only the page's own code.

A report shows model output, which is hostile data: it is always inserted as text (escaped in the markup,
``textContent`` in the scripts), and the policy is the second wall should that ever slip. It is a
``<meta http-equiv>`` (the pages are files, opened without a server to send a header) placed before any
script or style, and it allows:

* scripts: exactly the page's inline scripts, each by the SHA-256 of its text as written (a script added
  to the page, or one a model's text smuggled in, has another hash and never runs);
* styles: the page's ``<style>`` blocks by hash, and the values of its ``style`` attributes by hash with
  ``'unsafe-hashes'`` (the heatmap cells' colours; a hash cannot name an attribute otherwise, and
  ``'unsafe-inline'`` would allow any style). The attribute values are read from the page's own markup
  (:func:`style_attributes`): text a model wrote is escaped there, so it never forms a tag or an attribute;
* images: ``data:`` only (the embedded PNG figures);
* nothing else (``default-src 'none'``): no network, no frames, no fonts, no forms, no ``<base>``.

Hashes are computed here from the same strings the page writes, so a page and its policy cannot drift.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable, Sequence

__all__ = ["source_hash", "content_security_policy", "page_head", "style_attributes"]

# a style attribute inside a tag: "<", a tag name, attributes without "<" or ">", then style='...' or "..."
_STYLE_ATTRIBUTE = re.compile(r"""<[A-Za-z][^<>]*?\sstyle=(['"])([^'"<>]*)\1""")


def source_hash(text: str) -> str:
    """The CSP source expression of an inline script, style or style attribute: ``'sha256-<base64>'``.

    Args:
        text: the exact text between the tags (or the attribute's value, unescaped), as the browser reads it.
    """
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def style_attributes(markup: str) -> set[str]:
    """The values of the ``style`` attributes of the tags in ``markup`` (entities decoded, as the browser hashes them).

    Only tags count: escaped text (``&lt;b style='x'&gt;``) has no ``<`` and a data block holds none
    (``drilldown`` writes ``<`` there as ``\\u003c``), so nothing a model wrote is allowed by accident.
    One pass of a regular expression without nested repetition: linear in the markup's length.

    Args:
        markup: the page's body as written.
    """
    return {html.unescape(m.group(2)) for m in _STYLE_ATTRIBUTE.finditer(markup)}


def content_security_policy(
    scripts: Sequence[str] = (), styles: Sequence[str] = (), style_attributes: Iterable[str] = ()
) -> str:
    """The policy text that allows exactly these inline scripts, styles and style attribute values.

    Args:
        scripts: the text of each inline ``<script>`` that runs (data blocks such as
            ``type='application/json'`` never run and need none).
        styles: the text of each ``<style>`` block.
        style_attributes: the value of each ``style=`` attribute (duplicates are fine).
    """
    script_src = " ".join(dict.fromkeys(source_hash(s) for s in scripts)) or "'none'"
    style_src = " ".join(dict.fromkeys(source_hash(s) for s in styles))
    attributes = " ".join(sorted({source_hash(a) for a in style_attributes}))
    if attributes:
        style_src = f"{style_src} 'unsafe-hashes' {attributes}".strip()
    style_src = style_src or "'none'"
    return (
        f"default-src 'none'; script-src {script_src}; style-src {style_src}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def page_head(title: str, body: str, styles: Sequence[str] = (), scripts: Sequence[str] = ()) -> str:
    """A page's start, ``<!DOCTYPE html>`` to ``<body>``: charset, policy, title and its style blocks.

    Args:
        title: the page title (escaped here).
        body: the markup that follows (its ``style`` attributes are allowed by hash).
        styles: the page's ``<style>`` blocks, written into the head in this order.
        scripts: the text of every inline script ``body`` holds (each allowed by hash; nothing else runs).
    """
    policy = html.escape(content_security_policy(scripts, styles, style_attributes(body)), quote=True)
    blocks = "".join(f"<style>{s}</style>" for s in styles)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>{html.escape(title)}</title>{blocks}</head><body>"
    )
