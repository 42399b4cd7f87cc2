#!/usr/bin/env python3
"""`report --format=html` in a real headless browser (Debian's chromium): the page renders, and
the numbers its pictures show are the JSON report's of the same run.

One short real run on loopback (no root): four live exporters answer UDP echo and HTTP /echo,
each on one port; the reporter's static peers are them, under nodes and zones that make the
three path classes and three zones (same_node, same_zone, two cross_zone in two zones), so the
ladder and the zone matrix have rows. `report --format=json` saves the run; its cross-zone RTT
p50 moved three spreads away is the baseline, and `--input=run.json --baseline=...` prints the
same report as JSON and as HTML (a zone renamed to markup, as a hostile file could, to check the
escaping). Checks:
  - the HTML needs no network: no "://" anywhere, a Content-Security-Policy of default-src 'none';
  - chromium --dump-dom: every ladder row and zone-matrix cell of the JSON is drawn, each <text>
    with data-value equal to the JSON figure (same number) and showing it in ms (or n<N where
    the JSON has null); the verdict is the JSON's summary; the markup zone is text, not an element;
  - chromium --screenshot: a PNG of the window's size (1000 x 1400) that is not blank (many
    colours; the ladder's bar colours present).

Usage: report_html_test.py --exporter BIN [--chromium BIN] [--screenshot-dir DIR]
Exit 77 (skipped) without chromium, unless CI=true (then 1). Every step bounded by a timeout.
"""
import argparse
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import labkit  # noqa: E402
from labkit import check, log  # noqa: E402

WIDTH, HEIGHT = 1000, 1400
HOSTILE_ZONE = "<img src=x onerror=alert(1)>&z"


class Dom(html.parser.HTMLParser):
    """The rendered DOM's elements that matter: <text data-value> with their text, the verdict,
    and every tag name seen."""

    def __init__(self):
        super().__init__()
        self.texts, self.tags, self.verdict = [], [], None
        self._open = None  # the element whose text is being collected
        self._verdict = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "text" and "data-value" in a:
            self._open = dict(a, text="")
            self.texts.append(self._open)
        if a.get("id") == "verdict":
            self._verdict = True
            self.verdict = ""

    def handle_endtag(self, tag):
        if tag == "text":
            self._open = None
        if tag == "p":
            self._verdict = False

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data
        if self._verdict:
            self.verdict += data


# The screenshot's size and colours, by Pillow (Debian's python3-pil). It installs for Debian's
# /usr/bin/python3; when this interpreter is another one (a pyenv), that one reads the PNG.
PNG_SCRIPT = """
import json, sys
from PIL import Image
with Image.open(sys.argv[1]) as im:
    colours = im.convert("RGB").getcolors(maxcolors=1 << 20) or []
    print(json.dumps([im.size[0], im.size[1], [c for _, c in colours]]))
"""


def pil_python():
    """An interpreter that has Pillow: this one, or Debian's; None when neither has."""
    for py in (sys.executable, "/usr/bin/python3"):
        if os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", "import PIL"], capture_output=True, timeout=30).returncode == 0:
            return py
    return None


def png_size_and_colours(py, path):
    """(width, height, distinct colours, {(r, g, b)}) of a PNG."""
    r = subprocess.run([py, "-c", PNG_SCRIPT, path], capture_output=True, text=True, timeout=60,
                       check=True)
    w, h, colours = json.loads(r.stdout)
    return w, h, len(colours), {tuple(c) for c in colours}


def figure(rep, section, key, name):
    for s in rep["sections"]:
        if s["id"] != section:
            continue
        for r in s["rows"]:
            if r["key"] == key:
                return r["figures"].get(name)
    return None


def chromium(binary, tmp, *args):
    # A profile of its own in tmp; no network is needed (file://), none is offered to it.
    return subprocess.run([binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--user-data-dir=" + os.path.join(tmp, "profile"),
                           *args], capture_output=True, text=True, timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "")
    ap.add_argument("--screenshot-dir", default="")
    a = ap.parse_args()
    if not a.chromium or not os.access(a.chromium, os.X_OK):
        return labkit.skip("chromium is not installed (apt-get install chromium)")
    a.pil_python = pil_python()
    if not a.pil_python:
        return labkit.skip("python3-pil is not installed (the screenshot's pixels)")
    tmp = tempfile.mkdtemp(prefix="podnet-report-html-")
    try:
        scenario(a, tmp)
    except Exception as e:  # a failed check, then clean up
        import traceback
        traceback.print_exc()
        check(False, "exception: %s" % e)
    finally:
        labkit.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return labkit.exit_code()


def scenario(a, tmp):
    exe = a.exporter
    peers = [("twin", "node-a", "zone-a"), ("neighbour", "node-b", "zone-a"),
             ("far", "node-c", "zone-b"), ("farther", "node-d", "zone-c")]
    ports = {}
    for name, _, _ in peers:
        _, ports[name] = labkit.start_exporter(
            exe, tmp, "listen_address: \"127.0.0.1:{port}\"\nself: { name: %s, node: n }\n"
            "responders: { udp_echo: { listen_address: \"127.0.0.1:{port}\" } }\n" % name,
            name=name)
    cfg = os.path.join(tmp, "reporter.yaml")
    with open(cfg, "w") as f:
        f.write("self: { name: reporter, node: node-a, zone: zone-a }\npeers:\n  static:\n")
        for name, node, zone in peers:
            f.write("    - { name: %s, address: 127.0.0.1, port: %d, node: %s, zone: %s }\n"
                    % (name, ports[name], node, zone))
        f.write("probes:\n"
                # Timeouts of 1 s: a busy CI machine must not turn a loopback answer into a
                # failure (exit 1).
                "  rtt: { protocol: udp, interval: 2s, count: 20, spacing: 10ms, timeout: 1s }\n"
                "  http: { interval: 5s, duration: 500ms, qps: 40, connections: 1, "
                "timeout: 1s, modes: [keepalive, new_connection] }\n")

    def report(*flags):
        r = subprocess.run([exe, "report", "--log.level=error", *flags], capture_output=True,
                           text=True, timeout=90)
        return r.returncode, r.stdout, r.stderr

    rc, out, err = report("--config.file=" + cfg, "--duration=4s", "--format=json")
    check(rc == 0, "a live run on loopback: exit 0 (%d) %s" % (rc, err.strip()[-500:]))
    run = json.loads(out)
    # A hostile file's zone name, in the zone matrix and its table.
    for s in run["sections"]:
        if s["id"] == "zones":
            for r in s["rows"]:
                if r["key"].get("peer_zone") == "zone-c":
                    r["key"]["peer_zone"] = HOSTILE_ZONE
    run_json = os.path.join(tmp, "run.json")
    with open(run_json, "w") as f:
        json.dump(run, f)
    base = json.loads(json.dumps(run))
    for s in base["sections"]:
        for r in s["rows"]:
            if s["id"] == "rtt" and r["key"]["path_class"] == "cross_zone":
                p50 = r["figures"]["p50_seconds"]
                p50["value"] = p50["value"] + 3 * p50["spread"] + 1e-4
    base_json = os.path.join(tmp, "baseline.json")
    with open(base_json, "w") as f:
        json.dump(base, f)
    rc, out, err = report("--input=" + run_json, "--baseline=" + base_json, "--format=json")
    check(rc == 0, "--input --baseline --format=json: exit 0 (%d) %s" % (rc, err.strip()[-300:]))
    rep = json.loads(out)
    rc, page, err = report("--input=" + run_json, "--baseline=" + base_json, "--format=html")
    check(rc == 0 and page.startswith("<!DOCTYPE html>"),
          "--format=html: exit 0, an HTML document (%d) %s" % (rc, err.strip()[-300:]))
    page_path = os.path.join(tmp, "report.html")
    with open(page_path, "w") as f:
        f.write(page)
    check("://" not in page and "default-src 'none'" in page,
          "self-contained: no URL in the page, a CSP that forbids every fetch (%d bytes)"
          % len(page))

    r = chromium(a.chromium, tmp, "--dump-dom", "file://" + page_path)
    check(r.returncode == 0 and "</svg>" in r.stdout,
          "chromium --dump-dom renders the page (%d, %d bytes of DOM) %s"
          % (r.returncode, len(r.stdout), r.stderr.strip()[-300:]))
    dom = Dom()
    dom.feed(r.stdout)
    drawn = {}
    for t in dom.texts:
        drawn[(t["data-section"], t["data-key"], t["data-figure"])] = t
    check(dom.verdict is not None and " ".join(dom.verdict.split()) ==
          "Verdict: " + rep["verdict"]["summary"] and rep["verdict"]["changed"],
          "the page's verdict is the JSON's: %r" % dom.verdict)
    expected = []
    for s in rep["sections"]:
        if s["id"] in ("rtt", "http", "zones"):
            for row in s["rows"]:
                names = ["p50_seconds"] + (["p90_seconds"] if s["id"] != "zones" else [])
                expected += [(s["id"], row["key"], n) for n in names]
    zone_cells = [e for e in expected if e[0] == "zones"]
    check(len(zone_cells) == 3 and len([e for e in expected if e[0] == "rtt"]) == 6,
          "the JSON has 3 RTT path classes x p50/p90 and 3 zone pairs: %s" % expected)
    wrong = []
    for section, key, name in expected:
        t = next((t for (s, k, n), t in drawn.items()
                  if s == section and json.loads(k) == key and n == name), None)
        want = figure(rep, section, key, name)["value"]
        if t is None:
            wrong.append("%s %s %s: not drawn" % (section, key, name))
            continue
        value = None if t["data-value"] == "null" else float(t["data-value"])
        text = t["text"].strip()
        shown_ok = text == "%.3f" % (want * 1e3) if want is not None else text.startswith("n<")
        if value != want or not shown_ok:
            wrong.append("%s %s %s: drawn %r as %r, JSON %r" % (section, key, name,
                                                                t["data-value"], text, want))
    check(not wrong and len(expected) == 3 + 6 + 2 * 2 * 3,
          "every ladder row and zone cell is drawn with the JSON's value, shown in ms "
          "(%d numbers): %s" % (len(expected), wrong or "all match"))
    log("drawn: " + "; ".join("%s %s %s=%s" % (s, k, n, t["text"].strip())
                              for (s, k, n), t in sorted(drawn.items())))
    check("img" not in dom.tags and HOSTILE_ZONE in r.stdout.replace("&lt;", "<")
          .replace("&gt;", ">").replace("&amp;", "&"),
          "a zone named %r is text, not an element" % HOSTILE_ZONE)

    shot = os.path.join(a.screenshot_dir or tmp, "report-html.png")
    if a.screenshot_dir:
        os.makedirs(a.screenshot_dir, exist_ok=True)
        with open(os.path.join(a.screenshot_dir, "report.html"), "w") as f:
            f.write(page)
    r = chromium(a.chromium, tmp, "--screenshot=" + shot, "--hide-scrollbars",
                 "--window-size=%d,%d" % (WIDTH, HEIGHT), "file://" + page_path)
    check(r.returncode == 0 and os.path.exists(shot),
          "chromium --screenshot (%d) %s" % (r.returncode, r.stderr.strip()[-300:]))
    w, h, n, colours = png_size_and_colours(a.pil_python, shot)
    # The ladder's bars: same_node #9cc79c, same_zone #7aa6d6, cross_zone #d98b5f.
    bars = {(0x9c, 0xc7, 0x9c), (0x7a, 0xa6, 0xd6), (0xd9, 0x8b, 0x5f)}
    check((w, h) == (WIDTH, HEIGHT) and n > 50 and bars <= colours,
          "the screenshot is %dx%d with %d colours, the ladder's three bar colours among them "
          "(%s)" % (w, h, n, shot if a.screenshot_dir else "not kept"))


if __name__ == "__main__":
    sys.exit(main())
