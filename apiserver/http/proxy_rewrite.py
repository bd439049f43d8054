"""Links in what a proxied pod or service answers, rewritten to go through the proxy again, as
kube-apiserver's proxy Transport does (k8s.io/apimachinery/pkg/util/proxy/transport.go).

A page served at `/api/v1/namespaces/NS/pods/NAME/proxy/` that links to `/status` means the
pod's `/status`: kube rewrites such absolute-path links in HTML (the attributes of its atom
table: `a href`, `img src`, `form action`, ...) and a redirect's `Location` to
`<proxy prefix>/status`.  Links to another host, relative links and links already under the
prefix are left as they are.  Only `text/html` answers are rewritten, plain or gzip-encoded
(re-encoded after), at most MAX_REWRITE_BYTES of them; anything else goes through untouched.
"""

from __future__ import annotations

import gzip
import posixpath
import re
import zlib
from urllib.parse import urlsplit, urlunsplit

MAX_REWRITE_BYTES = 10 * 1024 * 1024  # a bigger page goes through as it is (kube buffers it whole too)

# kube's atomsToAttrs: the tags whose attributes carry URLs
LINK_ATTRIBUTES: dict[str, frozenset[str]] = {
    "a": frozenset({"href"}),
    "applet": frozenset({"codebase"}),
    "area": frozenset({"href"}),
    "audio": frozenset({"src"}),
    "base": frozenset({"href"}),
    "blockquote": frozenset({"cite"}),
    "body": frozenset({"background"}),
    "button": frozenset({"formaction"}),
    "command": frozenset({"icon"}),
    "del": frozenset({"cite"}),
    "embed": frozenset({"src"}),
    "form": frozenset({"action"}),
    "frame": frozenset({"longdesc", "src"}),
    "head": frozenset({"profile"}),
    "html": frozenset({"manifest"}),
    "iframe": frozenset({"longdesc", "src"}),
    "img": frozenset({"longdesc", "src", "usemap"}),
    "input": frozenset({"src", "usemap", "formaction"}),
    "ins": frozenset({"cite"}),
    "link": frozenset({"href"}),
    "object": frozenset({"classid", "codebase", "data", "usemap"}),
    "q": frozenset({"cite"}),
    "script": frozenset({"src"}),
    "source": frozenset({"src"}),
    "video": frozenset({"poster", "src"}),
}

_TAG = re.compile(rb"<([A-Za-z][A-Za-z0-9]*)(\s[^<>]*)?>")
_ATTRIBUTE = re.compile(rb"""([A-Za-z_:][-A-Za-z0-9_:.]*)(\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)""")


def rewrite_url(value: str, prefix: str, host: str = "") -> str:
    """kube's rewriteURL: an absolute path (on no host, or this request's host) under `prefix`."""
    try:
        url = urlsplit(value)
    except ValueError:
        return value
    if (url.netloc and url.netloc != host) or not url.path.startswith("/"):
        return value
    if url.path.startswith(prefix):
        return urlunsplit(("", "", url.path, url.query, url.fragment))
    path = posixpath.join(prefix, url.path.lstrip("/"))
    if url.path.endswith("/") and not path.endswith("/"):
        path += "/"
    return urlunsplit(("", "", path, url.query, url.fragment))


def rewrite_html(page: bytes, prefix: str) -> bytes:
    """The page with the link attributes of LINK_ATTRIBUTES rewritten (text outside tags untouched)."""

    def tag(match: re.Match[bytes]) -> bytes:
        name, attrs = match.group(1).lower().decode(), match.group(2)
        wanted = LINK_ATTRIBUTES.get(name)
        if not wanted or not attrs:
            return match.group(0)

        def attribute(m: re.Match[bytes]) -> bytes:
            if m.group(1).lower().decode() not in wanted:
                return m.group(0)
            raw = m.group(3)
            quote = raw[:1] if raw[:1] in (b'"', b"'") else b""
            value = raw[1:-1] if quote else raw
            fixed = rewrite_url(value.decode("utf-8", "surrogateescape"), prefix).encode("utf-8", "surrogateescape")
            return m.group(1) + m.group(2) + quote + fixed + quote

        return b"<" + match.group(1) + _ATTRIBUTE.sub(attribute, attrs) + b">"

    return _TAG.sub(tag, page)


def rewrite_body(body: bytes, encoding: str, prefix: str) -> bytes | None:
    """An HTML answer rewritten (in its content encoding), or None to pass it through as it is."""
    encoding = encoding.strip().lower()
    try:
        if encoding in ("", "identity"):
            return rewrite_html(body, prefix)
        if encoding == "gzip":
            return gzip.compress(rewrite_html(_inflate(body, GZIP_WBITS), prefix))
        if encoding == "deflate":
            return zlib.compress(rewrite_html(_inflate(body, zlib.MAX_WBITS), prefix))
    except (zlib.error, ValueError):
        return None  # not what it says it is, or too big once inflated: relayed untouched
    return None


GZIP_WBITS = 16 + zlib.MAX_WBITS


def _inflate(body: bytes, wbits: int) -> bytes:
    """Decompressed, never past MAX_REWRITE_BYTES (a small bomb stays small); ValueError beyond."""
    inflater = zlib.decompressobj(wbits)
    page = inflater.decompress(body, MAX_REWRITE_BYTES + 1)
    if len(page) > MAX_REWRITE_BYTES or inflater.unconsumed_tail:
        raise ValueError("too big to rewrite")
    return page
