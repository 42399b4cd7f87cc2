#!/usr/bin/env python3
"""Every relative link in the repository's Markdown files resolves: the file or folder exists,
and a `#fragment` names a heading (or an HTML id/name) of the Markdown file it points into, as
GitHub makes anchors from headings. Links inside code (fenced blocks, `spans`) are not links;
absolute URLs (http:, https:, mailto:) are not checked (no network).

Usage: markdown_links.py --root SOURCE_DIR
Exit 0 when every link resolves; 1 with one line per broken link: `file:line: target: why`.
"""
import argparse
import os
import re
import sys
import urllib.parse

SKIP_DIRS = {".git", "node_modules", "build"}  # plus every folder starting with "." or "build"
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(```+|~~~+)")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ID = re.compile(r"<a\s[^>]*\b(?:name|id)=\"([^\"]+)\"", re.I)


def markdown_files(root):
    """Paths (relative to root, sorted) of every *.md under root outside build and hidden dirs."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith((".", "build"))]
        found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".md")]
    return sorted(found)


def prose_lines(text):
    """(line number, line, the line with its code spans blanked) of the lines outside fenced
    code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)[0] * 3
            if fence is None:
                fence = mark
            elif mark == fence:
                fence = None
            continue
        if fence is None:
            yield n, line, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda s: " " * len(s.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text: its rendered text lower-cased, every character but
    letters, digits, spaces, '-' and '_' removed, spaces made '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text):
    """The anchors GitHub gives a Markdown text: one per heading (a repeated one gets -1, -2, …)
    and every <a name|id="…">."""
    seen, result = {}, set()
    for _, line, prose in prose_lines(text):
        result.update(HTML_ID.findall(prose))
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        result.add(base if k == 0 else "%s-%d" % (base, k))
    return result


def check(root):
    problems, cache, count = [], {}, 0

    def anchors_of(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = anchors(f.read())
        return cache[path]

    for rel in markdown_files(root):
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for n, _, line in prose_lines(text):
            targets = INLINE.findall(line)
            m = REFDEF.match(line)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue  # an absolute URL
                count += 1
                where, _, fragment = target.partition("#")
                where = urllib.parse.unquote(where)
                if where.startswith("/"):
                    dest = os.path.join(root, where.lstrip("/"))
                else:
                    dest = os.path.normpath(os.path.join(os.path.dirname(path), where)) \
                        if where else path
                if not os.path.exists(dest):
                    problems.append("%s:%d: %s: no such file" % (rel, n, target))
                    continue
                if fragment and dest.endswith(".md") and os.path.isfile(dest):
                    if urllib.parse.unquote(fragment).lower() not in anchors_of(dest):
                        problems.append("%s:%d: %s: no heading with anchor #%s in %s"
                                        % (rel, n, target, fragment,
                                           os.path.relpath(dest, root)))
    return count, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    count, problems = check(os.path.abspath(a.root))
    for p in problems:
        print("BROKEN " + p)
    print("%d relative links in %d Markdown files checked, %d broken"
          % (count, len(markdown_files(a.root)), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
