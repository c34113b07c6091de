#!/usr/bin/env python3
"""call_rules.py [--every-layer] NM OBJECT... - libsbx's calls go one way.

The include rules (include_rules.py) see what a file includes, not what it
calls: a lower folder's header may declare a function that a higher folder
defines (that is how config.c once called the manifest check of api/).
This check reads the object files of libsbx (the static twin,
sbx_internal; each object lies in <layer>/<file>.c.o) with nm, links each
undefined global to the object that defines it, and fails when

  - a file calls a function defined in a folder its folder may not include
    (the same table as include_rules.py: ALLOWED there), or
  - files call each other in a cycle (inside one folder too), but for the
    pairs in TRANSITIONAL_CYCLES, which are being removed (an entry no
    longer needed is reported, not an error).

With --every-layer, every host/ layer of the table must have an object
among those given (so that a wrong object list cannot pass in silence).
Exit status 0 when the calls go one way, 1 with one line per problem.
"""
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from include_rules import ALLOWED, PUBLIC  # noqa: E402  (one table for both checks)

# Known cycles being removed: every file of such a cycle, sorted.
TRANSITIONAL_CYCLES = set()


def name_of(obj):
    """layer/file.c of .../<layer>/<file>.c.o"""
    base = os.path.basename(obj)
    if base.endswith('.o'):
        base = base[:-2]
    return os.path.basename(os.path.dirname(obj)) + '/' + base


def read(nm, objs):
    defs, uses = {}, collections.defaultdict(set)
    # one nm for all: -A starts each line with "<object>:"
    text = subprocess.run([nm, '-A'] + list(objs), capture_output=True, text=True,
                          check=True).stdout
    by_len = sorted(objs, key=len, reverse=True)
    for line in text.splitlines():
        o = next((o for o in by_len if line.startswith(o + ':')), None)
        if o is None:
            continue
        f = name_of(o)
        parts = line[len(o) + 1:].split()
        if len(parts) == 3 and parts[1] in 'TDBRCGSVW':
            defs[parts[2]] = f
        elif len(parts) == 2 and parts[0] == 'U':
            uses[f].add(parts[1])
    edges = collections.defaultdict(lambda: collections.defaultdict(set))
    for f, syms in uses.items():
        for s in syms:
            g = defs.get(s)
            if g and g != f:
                edges[f][g].add(s)
    return edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(tuple(sorted(comp)))

    nodes = set(edges) | {g for f in edges for g in edges[f]}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__.split('\n', 1)[0])
    every = argv[1] == '--every-layer'
    if every:
        argv = argv[1:]
    nm, objs = argv[1], argv[2:]
    errors = []
    # a check over no objects would pass in silence: with --every-layer
    # (libsbx's own objects), each layer of the table must have some
    layers = {'host/' + name_of(o).split('/')[0] for o in objs}
    for row in sorted(ALLOWED):
        if (every and row.startswith('host/') and row not in ('host/cli', 'host/mcp', PUBLIC)
                and row not in layers):
            errors.append('no object of %s was given' % row)
    edges = read(nm, objs)
    for f in sorted(edges):
        for g in sorted(edges[f]):
            lf, lg = 'host/' + f.split('/')[0], 'host/' + g.split('/')[0]
            if lf == lg:
                continue
            if lf not in ALLOWED:
                errors.append('%s: %s has no row in the include table' % (f, lf))
            elif lg not in ALLOWED[lf]:
                errors.append('%s calls %s of %s, which %s may not use: %s'
                              % (f, g, lg, lf, ', '.join(sorted(edges[f][g]))))
    seen = set()
    for comp in cycles(edges):
        if comp in TRANSITIONAL_CYCLES:
            seen.add(comp)
            continue
        calls = ['%s -> %s (%s)' % (a, b, ', '.join(sorted(edges[a][b])))
                 for a in comp for b in comp if b in edges[a]]
        errors.append('these files call each other: ' + '; '.join(calls))
    for unused in sorted(TRANSITIONAL_CYCLES - seen):
        print('note: transitional cycle no longer there: ' + ' '.join(unused))
    for e in errors:
        print('FAIL: ' + e)
    if not errors:
        print('calls go one way: %d objects, %d calling files'
              % (len(objs), len(edges)))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
