"""The tables of the reference docs (docs/*.md) as the drift tests read them."""
import os
import re

DOC_METRICS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "metrics.md")

# The label groups docs/metrics.md writes in italics.
DOC_LABEL_GROUPS = {"source": {"source_node", "source_zone"},
                    "peer": {"peer", "peer_node", "peer_zone", "path_class"},
                    "group": {"peer_zone", "path_class"}}


def table_rows(path, header):
    """The body rows (lists of stripped cells) of every Markdown table in `path` whose header
    row is `header` (a list of cell texts); no escaped pipes inside cells."""
    rows, in_table = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|"):
                in_table = False
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells == header:
                in_table = True
            elif in_table and len(cells) == len(header) and not cells[0].startswith("---"):
                rows.append(cells)
    return rows


def doc_metrics(path=DOC_METRICS):
    """docs/metrics.md's family tables: {family: (type, label names, present cell)}."""
    families = {}
    for cells in table_rows(path, ["family", "type", "labels", "unit", "present", "series"]):
        labels = set(re.findall(r"`(\w+)`", cells[2]))
        for g in re.findall(r"\*(\w+)\*", cells[2]):
            labels |= DOC_LABEL_GROUPS[g]
        families[cells[0].strip("`")] = (cells[1], labels, cells[4])
    return families


def exposed(text):
    """{family: (type, label names)} of a text exposition (le and quantile left out)."""
    text = text.decode() if isinstance(text, bytes) else text
    families = {}
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
        families[m.group(1)] = (m.group(2), set())
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        family = name if name in families else re.sub(r"_(bucket|sum|count)$", "", name)
        labels = set(re.findall(r'(\w+)="(?:[^"\\]|\\.)*"', line[len(name):].split("} ")[0]))
        families[family][1].update(labels - {"le", "quantile"})
    return families


def check_exposed(bodies, check, per_peer_histograms=False, every_probe=True):
    """Each family of the expositions `bodies` against docs/metrics.md: listed, same type, same
    label names (with `per_peer_histograms`, a histogram may carry `peer` and `peer_node` as
    well, as that setting adds them). A family's labels in the doc are the union over the probe
    kinds that write it (`podnet_probe_sent_bytes_total`: `service` from the Service probe
    only): without `every_probe` (a run of some kinds), the labels seen need only be among the
    doc's. Calls check(ok, text) once per family; returns ({family: (type, labels)} seen, the
    doc's families)."""
    doc = doc_metrics()
    seen = {}
    for body in bodies:
        for name, (kind, labels) in exposed(body).items():
            seen.setdefault(name, (kind, set()))[1].update(labels)
    for name in sorted(seen):
        kind, labels = seen[name]
        want = doc.get(name)
        if want and per_peer_histograms and kind == "histogram" and "peer_zone" in want[1]:
            want = (want[0], want[1] | {"peer", "peer_node"}, want[2])
        ok = want is not None and want[0] == kind and (
            want[1] == labels if every_probe else labels <= want[1])
        check(ok, "docs/metrics.md: %s %s {%s}%s" % (
            name, kind, ", ".join(sorted(labels)), "" if ok else
            " but the doc says %s" % (("%s {%s}" % (want[0], ", ".join(sorted(want[1]))))
                                      if want else "nothing")))
    return seen, doc
