#!/usr/bin/env python3
"""Production code stays within its seams: no file of exporter/ over --max-file-lines lines (600)
and no function over --max-function-lines lines (60), counted from the line of its opening brace
to the line of its closing one. Prints the longest few of each either way, so a file or function
growing towards the bound shows before it fails.

A function is found from its text, not compiled: comments, string and character literals (raw
strings too) are blanked first; then every `{` whose text since the last `;`, `{` or `}` ends
with a parameter list (`)`, optionally followed by qualifiers, a trailing return type or a
constructor's initialiser list) opens a function, unless it is a control statement (if, for,
while, switch, catch) or sits inside another function (a lambda or a local block is part of its
function). Counted this way, main at b3c43ac had 21 functions over 60 lines, as issue 38 found.

Usage: sizes.py --source-dir DIR [--max-file-lines 600] [--max-function-lines 60] [--top 5]
Exit 0 within both bounds; 1 naming each file and function over its bound.
"""
import argparse
import os
import re
import sys

CONTROL = re.compile(r"\b(if|for|while|switch|catch)\s*\(")
TYPE_HEAD = re.compile(r"\b(namespace|class|struct|enum|union)\b[^()]*$")
# The head of a function body: a parameter list, then qualifiers, a trailing return type or an
# initialiser list.
FUNCTION_HEAD = re.compile(r"\)\s*(?:const|override|noexcept|final|mutable|&|->[^{]*|:[^{]*|\s)*$")
NAME = re.compile(r"([~\w:]+(?:<[^()]*>)?)\s*\([^;{}]*$")


def blank_literals(text):
    """`text` with comments and literals emptied, line breaks kept (so line numbers hold)."""
    def keep_lines(m):
        return "\n" * m.group(0).count("\n")

    text = re.sub(r'R"([^()\\\s]{0,16})\(.*?\)\1"', lambda m: '""' + keep_lines(m), text,
                  flags=re.S)
    text = re.sub(r"/\*.*?\*/", keep_lines, text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)


def functions(text):
    """[(lines, first line, name)] of every function body in a C++ source's text."""
    out, stack, head = [], [], ""  # stack: (is a function, line of its brace, name)
    for number, line in enumerate(blank_literals(text).split("\n"), start=1):
        start = 0
        for i, ch in enumerate(line):
            if ch not in "{};":
                continue
            head += " " + line[start:i]
            start = i + 1
            if ch == "{":
                h = head.strip()
                is_function = (not any(f for f, _, _ in stack) and FUNCTION_HEAD.search(h)
                               and not CONTROL.search(h) and not TYPE_HEAD.search(h))
                name = NAME.search(h) if is_function else None
                stack.append((bool(is_function), number, name.group(1) if name else "?"))
            elif ch == "}" and stack:
                is_function, first, name = stack.pop()
                if is_function:
                    out.append((number - first + 1, first, name))
            head = ""
        head += " " + line[start:]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--max-file-lines", type=int, default=600)
    ap.add_argument("--max-function-lines", type=int, default=60)
    ap.add_argument("--top", type=int, default=5)
    a = ap.parse_args()
    files, funcs = [], []
    root = os.path.join(a.source_dir, "exporter")
    for folder, _, names in os.walk(root):
        for name in names:
            if not name.endswith((".cc", ".h")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, a.source_dir)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            files.append((text.count("\n"), rel))
            funcs.extend((n, "%s:%d %s" % (rel, first, fn)) for n, first, fn in functions(text))
    files.sort(reverse=True)
    funcs.sort(reverse=True)
    print("%d files, the longest: %s" % (len(files), ", ".join(
        "%s %d" % (f, n) for n, f in files[:a.top])))
    print("%d functions, the longest: %s" % (len(funcs), ", ".join(
        "%s %d" % (f, n) for n, f in funcs[:a.top])))
    over = (["file over %d lines: %s (%d)" % (a.max_file_lines, f, n)
             for n, f in files if n > a.max_file_lines] +
            ["function over %d lines: %s (%d)" % (a.max_function_lines, f, n)
             for n, f in funcs if n > a.max_function_lines])
    for line in over:
        print("FAILED: " + line)
    if over:
        print("Split it along its seams (docs/development.md, \"Layout\").")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
