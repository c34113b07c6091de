#!/usr/bin/env python3
"""include_rules.py SOURCE_DIR - check the include rules between folders.

Each folder below is one unit; a file may include its own folder's headers
and those of the folders its row names, nothing else (docs/ARCHITECTURE.md,
"Layers and include rules"). The host library's layers go one way:

    base < config < registry < api < sessions, and store sits on base alone.

  folder                 may include (besides itself)
  host/base              shared, abi, host/include/sbx
  host/config            host/base, shared, abi, host/include/sbx
  host/registry          host/config, host/base, shared, abi, host/include/sbx
  host/api               host/registry, host/config, host/base, shared, abi,
                         host/include/sbx
  host/store             host/base, shared, abi, host/include/sbx
  host/sessions          host/api, host/store, host/registry, host/config,
                         host/base, shared, abi, host/include/sbx
  host/cli               host/mcp, host/include/sbx, conformance/include/sbx,
                         shared
  host/mcp               host/include/sbx, shared
  host/include/sbx       abi (the public headers include only each other)
  conformance/include/sbx  host/include/sbx, abi
  conformance            conformance/include/sbx, host/include/sbx, shared, abi
  shared (and below)     abi  (nothing of host/, plugins/, agent/)
  abi                    nothing
  plugins/common         shared, abi (no plugin)
  plugins/e2bproto       plugins/common, shared, abi
  plugins/e2b, cube      plugins/e2bproto, plugins/common, shared, abi
  plugins/<any other>    plugins/common, shared, abi (no host/, no other plugin)
  agent                  shared

Includes are resolved by file existence, not by guessing: "x.h" is looked
up first beside the including file (as the compiler does), then below the
include roots (host/, host/include, abi, conformance/include, and every
folder of the table); <x/y.h> below the public include roots only (other
angle includes are system headers). A quoted include found nowhere, or
found in two places, is an error. Inside host/, a bare "x.h" must resolve
to the same folder or shared/; anything else is written "folder/x.h".

No source of one component (libsbx = host/ minus host/cli and host/mcp,
host/cli, host/mcp, each
plugin, agent, conformance) is compiled into another: every .c path named
in a component's CMakeLists.txt lies in that component. Sources of shared/
are the exception: shared/ is the library of helpers every component may
compile or link.

TRANSITIONAL lists the arrows that are known and being removed; each names
the file it allows. An entry no longer needed is reported (not an error)
so that it gets deleted.

The calls between libsbx's files are checked against the same table by
call_rules.py (from the objects, with nm); include_rules_catch.py plants
one violation of each kind in a scratch copy and expects this to fail.

Exit status 0 when the tree follows the rules, 1 with one line per
violation otherwise.
"""
import os
import re
import sys

PUBLIC = 'host/include/sbx'
CF_PUBLIC = 'conformance/include/sbx'

# The table: folder -> the folders it may include besides itself.
ALLOWED = {
    'host/base': ['shared', 'abi', PUBLIC],
    'host/config': ['host/base', 'shared', 'abi', PUBLIC],
    'host/registry': ['host/config', 'host/base', 'shared', 'abi', PUBLIC],
    'host/api': ['host/registry', 'host/config', 'host/base', 'shared', 'abi', PUBLIC],
    'host/store': ['host/base', 'shared', 'abi', PUBLIC],
    'host/sessions': ['host/api', 'host/store', 'host/registry', 'host/config',
                      'host/base', 'shared', 'abi', PUBLIC],
    'host/cli': ['host/mcp', PUBLIC, CF_PUBLIC, 'shared'],
    'host/mcp': [PUBLIC, 'shared'],
    PUBLIC: ['abi'],
    CF_PUBLIC: [PUBLIC, 'abi'],
    'conformance': [CF_PUBLIC, PUBLIC, 'shared', 'abi'],
    'shared': ['abi'],
    'abi': [],
    'plugins/common': ['shared', 'abi'],
    'plugins/e2bproto': ['plugins/common', 'shared', 'abi'],
    'plugins/e2b': ['plugins/e2bproto', 'plugins/common', 'shared', 'abi'],
    'plugins/cube': ['plugins/e2bproto', 'plugins/common', 'shared', 'abi'],
    'plugins/*': ['plugins/common', 'shared', 'abi'],
    'agent': ['shared'],
}

# Known arrows being removed: (including folder, included or compiled file).
TRANSITIONAL = set()

SCANNED = ['host', 'shared', 'abi', 'conformance', 'plugins', 'agent']
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
C_SOURCE = re.compile(r'[^\s()"\';]+\.c(?![A-Za-z0-9_.])')


def unit_of(rel):
    """The table row of a path relative to the source dir, or None."""
    parts = rel.split('/')
    if rel.startswith(PUBLIC + '/'):
        return PUBLIC
    if rel.startswith(CF_PUBLIC + '/'):
        return CF_PUBLIC
    top = parts[0]
    if top in ('shared', 'abi', 'agent', 'conformance'):
        return top
    if top in ('host', 'plugins') and len(parts) > 2:
        return top + '/' + parts[1]
    return None


def row_of(unit):
    if unit in ALLOWED:
        return ALLOWED[unit]
    if unit and unit.startswith('plugins/'):
        return ALLOWED['plugins/*']
    return None


def component_of(rel):
    """What a source is compiled into: libsbx, the sbx command, a plugin..."""
    u = unit_of(rel)
    if u and u.startswith('host/') and u not in ('host/cli', 'host/mcp'):
        return 'libsbx'
    if u == CF_PUBLIC:
        return 'conformance'
    if u is None and rel.split('/')[0] == 'host':
        return 'libsbx'
    return u


class Checker:
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.errors = []
        self.used = set()
        self.units = set()
        self.files = set()  # every file below SCANNED: resolving is a lookup
        for top in SCANNED:
            for d, dirs, names in os.walk(os.path.join(self.root, top)):
                dirs.sort()
                rel = os.path.relpath(d, self.root)
                self.files.update(os.path.join(rel, n) for n in names)
                u = unit_of(rel + '/x')
                if u:
                    self.units.add(rel)
        self.quote_roots = sorted({'host', 'host/include', 'abi',
                                   'conformance/include'} | self.units)
        self.angle_roots = ['host/include', 'abi', 'conformance/include']

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def error(self, where, text):
        self.errors.append('%s: %s' % (where, text))

    def allowed(self, unit, target_rel):
        tu = unit_of(target_rel)
        if tu == unit or tu in (row_of(unit) or []):
            return True
        if (unit, target_rel) in TRANSITIONAL:
            self.used.add((unit, target_rel))
            return True
        return False

    def resolve(self, src_rel, kind, name):
        """The paths (relative) an include names, by file existence."""
        if kind == '"':
            beside = os.path.normpath(os.path.join(os.path.dirname(src_rel), name))
            if beside in self.files:
                return [beside]
            roots = self.quote_roots
        else:
            roots = self.angle_roots
        found = []
        for r in roots:
            p = os.path.normpath(os.path.join(r, name))
            if p in self.files and p not in found:
                found.append(p)
        return found

    def check_file(self, src_rel):
        unit = unit_of(src_rel)
        if unit is None or row_of(unit) is None:
            self.error(src_rel, 'its folder has no row in the include table '
                       '(tests/support/include_rules.py)')
            return
        with open(os.path.join(self.root, src_rel), errors='replace') as f:
            lines = f.readlines()
        for n, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            where = '%s:%d' % (src_rel, n)
            found = self.resolve(src_rel, kind, name)
            shown = '%s%s%s' % (kind, name, '"' if kind == '"' else '>')
            if not found:
                if kind == '"':
                    self.error(where, '#include %s: no such file in the tree' % shown)
                continue
            if len(found) > 1:
                self.error(where, '#include %s is ambiguous (%s): name its folder'
                           % (shown, ', '.join(found)))
                continue
            target = found[0]
            tu = unit_of(target)
            if (unit.startswith('host/') and unit != PUBLIC and kind == '"'
                    and '/' not in name and tu not in (unit, 'shared')):
                self.error(where, '#include %s resolves to %s: inside host/ a bare '
                           'include is of the same folder or shared/; write it "%s"'
                           % (shown, target, target[len('host/'):]
                              if target.startswith('host/') else target))
                continue
            if not self.allowed(unit, target):
                self.error(where, '#include %s: %s may not include %s (%s)'
                           % (shown, unit, tu or target, target))

    def check_cmake(self, cm_rel):
        comp = component_of(cm_rel)
        if comp is None:
            return
        here = os.path.dirname(cm_rel)
        unit = unit_of(cm_rel) or 'libsbx'
        with open(os.path.join(self.root, cm_rel)) as f:
            text = f.read()
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split('#', 1)[0]
            for tok in C_SOURCE.findall(line):
                p = tok
                for var, base in (('${CMAKE_SOURCE_DIR}', '.'), ('${PROJECT_SOURCE_DIR}', '.'),
                                  ('${CMAKE_CURRENT_SOURCE_DIR}', here),
                                  ('${CMAKE_CURRENT_LIST_DIR}', here),
                                  # generated at build time by this folder's rules
                                  ('${CMAKE_CURRENT_BINARY_DIR}', here)):
                    if p.startswith(var):
                        p = base + p[len(var):]
                        break
                else:
                    if not p.startswith('$'):
                        p = os.path.join(here, p)
                # the literal part: up to a variable or a wildcard
                lit = re.split(r'[$*?\[]', p, maxsplit=1)[0]
                lit = os.path.normpath(lit) if lit else '.'
                if lit.startswith('..'):
                    self.error('%s:%d' % (cm_rel, n), '%s is outside the tree' % tok)
                    continue
                if lit == '.':
                    self.error('%s:%d' % (cm_rel, n), 'cannot tell which folder %s '
                               'is in: name it with its folder' % tok)
                    continue
                tc = component_of(lit + ('' if lit.endswith('.c') else '/x.c'))
                if tc in (comp, 'shared'):
                    continue
                full = os.path.normpath(p)
                if (unit, full) in TRANSITIONAL:
                    self.used.add((unit, full))
                    continue
                self.error('%s:%d' % (cm_rel, n), '%s compiles %s, a source of %s, '
                           'into %s (link its library, or move what both need to '
                           'shared/)' % (cm_rel, full, tc, comp))

    def run(self):
        for top in SCANNED:
            for d, dirs, files in os.walk(os.path.join(self.root, top)):
                dirs.sort()
                for name in sorted(files):
                    rel = self.rel(os.path.join(d, name))
                    if name.endswith(('.c', '.h')):
                        if rel.startswith('host/') and rel.count('/') == 1:
                            self.error(rel, 'host/ holds only layer folders; put it '
                                       'in one')
                            continue
                        self.check_file(rel)
                    elif name == 'CMakeLists.txt':
                        self.check_cmake(rel)
        for unused in sorted(TRANSITIONAL - self.used):
            print('note: transitional entry no longer needed: %s -> %s' % unused)
        for e in self.errors:
            print('FAIL: ' + e)
        if not self.errors:
            print('include rules hold: %d folders checked' % len(self.units))
        return 1 if self.errors else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__.split('\n', 1)[0])
    sys.exit(Checker(sys.argv[1]).run())
