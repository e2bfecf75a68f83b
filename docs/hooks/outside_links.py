"""mkdocs hook: links from docs/ to the repository's other files, checked and kept readable.

A page links `../rules/examples/` or `../ARCHITECTURE.md` the way GitHub follows them, but
mkdocs knows only the files under docs/ and (strict) fails on any other link. So before mkdocs
reads a page, every relative link that leaves docs/ is checked here instead: its target must
exist in the repository (else a warning, which strict turns into a failed build, as for a link
inside docs/), and on the site it becomes its text and path, or a link into `repo_url` when the
site names one.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.outside_links")

_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Checks and rewrites the links of one page that leave docs/."""
    docs_dir = Path(config["docs_dir"]).resolve()
    repo_root = docs_dir.parent
    page_dir = posixpath.dirname(page.file.src_uri)
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def rewrite(match: re.Match[str]) -> str:
        text, target = match["text"], match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/|^#", target):
            return match[0]  # external, absolute or same-page: mkdocs judges those
        path = target.split("#", 1)[0]
        inside = posixpath.normpath(posixpath.join(page_dir, path))
        if not inside.startswith("../"):
            return match[0]  # a page of the site: mkdocs validates it
        repo_path = inside[len("../") :]
        if not (repo_root / repo_path).exists():
            log.warning(
                "Doc file '%s' links '%s', but '%s' is not in the repository.",
                page.file.src_uri,
                target,
                repo_path,
            )
            return match[0]
        if repo_url:
            return f"[{text}]({repo_url}/blob/HEAD/{repo_path})"
        return text if repo_path.rstrip("/") in text else f"{text} (`{repo_path}`)"

    return _LINK.sub(rewrite, markdown)
