#!/usr/bin/env python3
"""Markdown tables of the benchmark examples, for scripts/benchmarks.sh.

    tables.py merge CURRENT_OUTPUT PREVIOUS_OUTPUT LABEL
    tables.py summary OUTPUT
    tables.py ab FILE...

`merge` adds a previous build's futexkit figures to an example's tables.
Both files are the output of the same example (markdown tables), from this build and from a
previous one run in the same session. In a table with a `backend`
column, the previous build's futexkit rows are added as rows labelled LABEL; in any other
table with a `futexkit` column, a LABEL column is added after it, filled from the previous
table's row with the same cells before the futexkit column (or the same position). A table
pairs with the previous output's table of the same title (the line before it), or else with
the one in its place if their columns are the same; a table with no partner is left unchanged.
Everything else is printed as it is.

`summary` prints one line per table with a `futexkit / best` column: the lowest and highest
value in it, which is the first thing to read in such a table.

`ab` reads the files that scripts/device-ab.sh writes (one per example, every run headed by
`=== BUILD, LOAD, round N: ...`) and prints, per example and load, one line per table row and
column of futexkit's: its figure, its ratio to the best, and its median thread, for every build
in turn, one value per round (the builds in the order of their first run).
"""

import re
import sys


def tables(lines):
    """(start, end) line ranges of markdown tables: runs of lines starting with '|'."""
    out, start = [], None
    for i, line in enumerate(lines + [""]):
        if line.startswith("|"):
            if start is None:
                start = i
        elif start is not None:
            out.append((start, i))
            start = None
    return out


def title(lines, start):
    """The line that names the table starting at `start`: the last non-empty line before it."""
    for line in reversed(lines[:start]):
        if line.strip():
            return line.strip()
    return None


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row(values):
    return "| " + " | ".join(values) + " |"


def merge(cur, prev, label):
    head, rows = cells(cur[0]), [cells(line) for line in cur[2:]]
    prev_head, prev_rows = cells(prev[0]), [cells(line) for line in prev[2:]]
    if "backend" in head and "backend" in prev_head:
        b, pb = head.index("backend"), prev_head.index("backend")
        out = [cur[0], cur[1]]
        for r in rows:
            out.append(row(r))
            if r[b] == "futexkit":
                for p in prev_rows:
                    if p[0] == r[0] and p[pb] == "futexkit":
                        p = list(p)
                        p[pb] = label
                        out.append(row(p))
        return out
    if "futexkit" not in head or "futexkit" not in prev_head:
        return cur
    f, pf = head.index("futexkit"), prev_head.index("futexkit")
    # A row is named by its cells before the futexkit column (threads, and a mix or size
    # where the table has one).
    by_key = {tuple(p[:pf]): p for p in prev_rows}
    out = [row(head[: f + 1] + [label] + head[f + 1 :]), row(["---"] * (len(head) + 1))]
    for i, r in enumerate(rows):
        p = by_key.get(tuple(r[:f])) or (prev_rows[i] if i < len(prev_rows) else None)
        value = p[pf] if p is not None and pf < len(p) else "-"
        out.append(row(r[: f + 1] + [value] + r[f + 1 :]))
    return out


def summary(lines):
    for s, e in tables(lines):
        head = cells(lines[s])
        if "futexkit / best" not in head:
            continue
        k = head.index("futexkit / best")
        values = []
        for line in lines[s + 2 : e]:
            try:
                values.append(float(cells(line)[k]))
            except (ValueError, IndexError):
                pass
        if values:
            caption = next((lines[i] for i in range(s - 1, -1, -1) if lines[i].strip()), "")
            print(
                f"- {caption.rstrip(':')}: futexkit / best from {min(values):.2f} to "
                f"{max(values):.2f} over {len(values)} rows (above 1: futexkit ahead)."
            )


def ab_columns(head):
    """The columns of a table that `ab` reports: futexkit's figures, its ratios to the best
    (not the per-round ones), and its median thread (the first of that column's values)."""
    wanted = []
    for k, name in enumerate(head):
        if name.startswith("per round"):
            continue
        if (
            name in ("futexkit", "writes fk", "reads fk")
            or "/ best" in name
            or "best /" in name
            or name.startswith("median thread")
        ):
            wanted.append(k)
    return wanted


def ab(paths):
    for path in paths:
        # (build, load) -> the lines of each of its runs, in file order (one per round)
        runs, builds = {}, []
        run, body = None, []
        for line in open(path).read().splitlines() + ["=== end"]:
            if not line.startswith("=== "):
                body.append(line)
                continue
            if run is not None:
                runs.setdefault(run, []).append(body)
            m = re.match(r"=== (.*), (idle|busy), round \d+:", line)
            run, body = (m.group(1), m.group(2)) if m else None, []
            if m and m.group(1) not in builds:
                builds.append(m.group(1))
        for load in ("idle", "busy"):
            # (table, row, column) -> build -> one value per round
            figures = {}
            for build in builds:
                for lines in runs.get((build, load), []):
                    for s, e in tables(lines):
                        head = cells(lines[s])
                        columns = ab_columns(head)
                        if not columns:
                            continue
                        table = (title(lines, s) or "").split(":")[0][:40]
                        for line in lines[s + 2 : e]:
                            r = cells(line)
                            for k in columns:
                                if k >= len(r):
                                    continue
                                median = head[k].startswith("median thread")
                                key = (table, " ".join(r[: columns[0]]), "median thread" if median else head[k])
                                value = r[k].split(" / ")[0] if median else r[k]
                                figures.setdefault(key, {}).setdefault(build, []).append(value)
            if not figures:
                continue
            print(f"## {path}, {load}")
            for (table, row_name, column), by_build in figures.items():
                per_build = " | ".join(f"{b}: {', '.join(by_build.get(b, ['-']))}" for b in builds)
                print(f"{table} | {row_name} | {column} | {per_build}")
            print()


def main():
    if sys.argv[1] == "ab":
        ab(sys.argv[2:])
        return
    if sys.argv[1] == "summary":
        summary(open(sys.argv[2]).read().splitlines())
        return
    cur = open(sys.argv[2]).read().splitlines()
    prev = open(sys.argv[3]).read().splitlines()
    label = sys.argv[4]
    prev_tables = tables(prev)
    prev_by_title = {title(prev, ps): (ps, pe) for ps, pe in prev_tables}
    out, last = [], 0
    for k, (s, e) in enumerate(tables(cur)):
        out.extend(cur[last:s])
        match = prev_by_title.get(title(cur, s))
        if match is None and k < len(prev_tables):
            # An untitled or retitled table pairs with the one in its place only if their
            # columns are the same.
            ps, pe = prev_tables[k]
            if cells(prev[ps]) == cells(cur[s]):
                match = (ps, pe)
        if match is not None:
            ps, pe = match
            out.extend(merge(cur[s:e], prev[ps:pe], label))
        else:
            out.extend(cur[s:e])
        last = e
    out.extend(cur[last:])
    print("\n".join(out))


if __name__ == "__main__":
    main()
