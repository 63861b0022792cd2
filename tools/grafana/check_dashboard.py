#!/usr/bin/env python3
"""Checks a Grafana dashboard against a Prometheus text exposition.

usage: check_dashboard.py DASHBOARD.json METRICS.prom

The dashboard must parse as JSON, and each panel other than a row must have
a title, a description and a datasource (rows: a title).  Every metric name
used in the panels' PromQL expressions (targets' "expr") and in the query
template variables must be present in the exposition: a metric is present
when it has a sample or a "# TYPE" line (a counter without samples yet has
one); a histogram or summary counts through its _bucket, _sum and _count
series, and the other way round.

Exit status: 0 when all is well (it prints "dashboard: N panels, M metric
names, all present", N not counting rows), 1 when a check fails (each
problem on a line of its own on stderr), 2 for bad arguments.
"""
import argparse
import json
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# Words of PromQL that look like metric names but are not.
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
            "offset", "atan2", "inf", "nan"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
NAME_MATCHER = re.compile(r'__name__\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`)')
SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr):
    """The metric names a PromQL expression selects (Grafana variables allowed)."""
    names = set()
    # {__name__="x"} selects x (a regex matcher selects an unknown set: left out)
    for m in NAME_MATCHER.finditer(expr):
        names.add(m.group(1)[1:-1])
    e = STRING.sub('""', expr)
    # the label matchers, the range and subquery selectors, grouping label lists
    e = re.sub(r"\{[^{}]*\}", " ", e)
    e = re.sub(r"\[[^\[\]]*\]", " ", e)
    e = GROUPING.sub(" ", e)
    # Grafana's variables: $var, ${var}, ${var:fmt}, [[var]]
    e = re.sub(r"\$\{[^}]*\}|\$\w+|\[\[[^\]]*\]\]", " 1 ", e)
    for m in re.finditer(r"(?<![\w.:])(" + NAME + r")(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue   # a function, an aggregation or a keyword
        names.add(word)
    return names


def split_args(s):
    """Splits @p s at its top-level commas (not in brackets or strings)."""
    out, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        m = STRING.match(s, i)
        if m:
            cur.append(m.group(0))
            i = m.end()
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def variable_names(query):
    """The metric names of a Prometheus template variable's query."""
    q = query.strip()
    m = re.fullmatch(r"(label_values|query_result|metrics|label_names)\s*\((.*)\)", q, re.S)
    if not m:
        return metric_names(q)
    func, args = m.group(1), split_args(m.group(2))
    if func == "label_values":
        # label_values(label) names no metric; label_values(expr, label) does
        return metric_names(args[0]) if len(args) > 1 else set()
    if func == "query_result":
        return metric_names(m.group(2))
    return set()   # metrics(regex), label_names()


def exposition_names(path):
    """The names present in a Prometheus text exposition (samples and # TYPE lines)."""
    present = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                m = re.match(r"#\s*TYPE\s+(" + NAME + r")\s+(\w+)", line)
                if m:
                    name, kind = m.group(1), m.group(2)
                    present.add(name)
                    if kind in ("histogram", "gaugehistogram", "summary"):
                        present.update(name + s for s in SUFFIXES)
                    elif kind == "counter" and not name.endswith("_total"):
                        present.add(name + "_total")   # OpenMetrics names a counter without _total
                continue
            m = re.match(NAME, line)
            if m:
                present.add(m.group(0))
    # a histogram's series also stand for its own name
    for name in list(present):
        for s in SUFFIXES:
            if name.endswith(s):
                present.add(name[:-len(s)])
    return present


def walk_panels(panels):
    """Every panel, the ones in collapsed rows included."""
    for p in panels or []:
        yield p
        if p.get("type") == "row":
            yield from walk_panels(p.get("panels"))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Checks a Grafana dashboard's panels and the metric names of its "
                                             "PromQL against a Prometheus text exposition.")
    ap.add_argument("dashboard", help="the dashboard's JSON model")
    ap.add_argument("exposition", help="a Prometheus text exposition (a scrape of /metrics, a .prom file)")
    args = ap.parse_args(argv)

    problems = []
    try:
        with open(args.dashboard, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{args.dashboard}: {e}", file=sys.stderr)
        return 1
    try:
        present = exposition_names(args.exposition)
    except (OSError, UnicodeDecodeError) as e:
        print(f"{args.exposition}: {e}", file=sys.stderr)
        return 1
    if not isinstance(dash, dict):
        print(f"{args.dashboard}: not a dashboard (a JSON object)", file=sys.stderr)
        return 1

    used = {}   # metric name -> where it is used
    npanels = 0
    for p in walk_panels(dash.get("panels")):
        if not isinstance(p, dict):
            problems.append("a panel is not a JSON object")
            continue
        title = p.get("title")
        where = f"panel {p.get('id', '?')} ({title or 'untitled'})"
        if not isinstance(title, str) or not title.strip():
            problems.append(f"{where}: no title")
        if p.get("type") == "row":
            continue
        npanels += 1
        desc = p.get("description")
        if not isinstance(desc, str) or not desc.strip():
            problems.append(f"{where}: no description")
        if not p.get("datasource"):
            problems.append(f"{where}: no datasource")
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"{where}: no queries")
        for t in targets:
            expr = t.get("expr") if isinstance(t, dict) else None
            if not isinstance(expr, str) or not expr.strip():
                problems.append(f"{where}: a query without an expr")
                continue
            for name in metric_names(expr):
                used.setdefault(name, where)

    for v in (dash.get("templating") or {}).get("list") or []:
        if not isinstance(v, dict) or v.get("type") != "query":
            continue
        q = v.get("query")
        if isinstance(q, dict):   # Grafana 10 keeps {"query": ..., "refId": ...}
            q = q.get("query")
        if isinstance(q, str):
            for name in variable_names(q):
                used.setdefault(name, f"variable ${v.get('name', '?')}")

    missing = sorted(n for n in used if n not in present)
    for name in missing:
        problems.append(f"metric {name} (used in {used[name]}) is not in {args.exposition}")
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        return 1
    print(f"dashboard: {npanels} panels, {len(used)} metric names, all present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
