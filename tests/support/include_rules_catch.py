#!/usr/bin/env python3
"""include_rules_catch.py SOURCE_DIR - include_rules.py passes on a scratch
copy of the tree, and fails on it with the expected message for each kind
of violation planted in the copy (one at a time, undone after). One
process for every case: the copy is made once."""
import contextlib
import io
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import include_rules  # noqa: E402

# (file, line appended to it (the file is created when missing), what the
# check must say)
CASES = [
    # host layers: a lower folder including a higher one
    ('host/base/cancel.c',
     '#include "config/config.h"',
     'host/base may not include host/config'),
    ('host/config/config.c',
     '#include "api/ctx.h"',
     'host/config may not include host/api'),
    ('host/registry/loader.c',
     '#include "api/exec_quiet.h"',
     'host/registry may not include host/api'),
    ('host/api/ctx.c',
     '#include "sessions/internal.h"',
     'host/api may not include host/sessions'),
    ('host/api/ctx.c',
     '#include "store/store.h"',
     'host/api may not include host/store'),
    ('host/store/rows.c',
     '#include "config/config.h"',
     'host/store may not include host/config'),
    ('host/store/rows.c',
     '#include "sessions/internal.h"',
     'host/store may not include host/sessions'),
    # a bare include inside host/ names the same folder or shared/
    ('host/api/ctx.c',
     '#include "text_escape.h"',
     'inside host/ a bare include is of the same folder or shared/'),
    # host/ holds layer folders only; a new folder needs a row
    ('host/stray.c',
     '#include "base/cancel.h"',
     'host/ holds only layer folders'),
    ('host/extra/new.c',
     '#include "base/cancel.h"',
     'its folder has no row in the include table'),
    # the sbx command: public headers (and shared/) only
    ('host/cli/main.c',
     '#include "config/config.h"',
     'host/cli may not include host/config'),
    ('host/cli/main.c',
     '#include <sbx/provider.h>',
     'host/cli may not include abi'),
    # the public headers: each other and abi/ only
    ('host/include/sbx/sbx.h',
     '#include "hex.h"',
     'host/include/sbx may not include shared'),
    ('host/include/sbx/sbx.h',
     '#include "registry/provider.h"',
     'host/include/sbx may not include host/registry'),
    # shared/: nothing of host/, plugins/, agent/
    ('shared/hex.c',
     '#include <sbx/sbx.h>',
     'shared may not include host/include/sbx'),
    ('shared/hex.c',
     '#include "confine.h"',
     'shared may not include plugins/common'),
    ('shared/hex.c',
     '#include "agent.h"',
     'shared may not include agent'),
    # plugins: no host/, no other plugin; plugins/common no plugin
    ('plugins/local/exec.c',
     '#include <sbx/sbx.h>',
     'plugins/local may not include host/include/sbx'),
    ('plugins/local/exec.c',
     '#include "store/store.h"',
     'plugins/local may not include host/store'),
    ('plugins/local/exec.c',
     '#include "docker.h"',
     'plugins/local may not include plugins/docker'),
    ('plugins/local/exec.c',
     '#include "e2b_core.h"',
     'plugins/local may not include plugins/e2bproto'),
    ('plugins/local/exec.c',
     '#include "agent.h"',
     'plugins/local may not include agent'),
    ('plugins/docker/exec.c',
     '#include "e2bproto.h"',
     'plugins/docker may not include plugins/e2bproto'),
    ('plugins/common/base64.c',
     '#include "e2b_core.h"',
     'plugins/common may not include plugins/e2bproto'),
    ('plugins/e2bproto/api.c',
     '#include "local.h"',
     'plugins/e2bproto may not include plugins/local'),
    # agent/: shared/ only
    ('agent/conn.c',
     '#include "confine.h"',
     'agent may not include plugins/common'),
    ('agent/conn.c',
     '#include <sbx/sbx.h>',
     'agent may not include host/include/sbx'),
    # resolution by existence: nowhere, or in two places
    ('plugins/local/exec.c',
     '#include "no_such_header.h"',
     'no such file in the tree'),
    ('plugins/local/hex.h',
     '/* a second hex.h */',
     'is ambiguous'),
    # no source of one component compiled into another
    ('plugins/local/CMakeLists.txt',
     'target_sources(sbx_provider_local PRIVATE ${CMAKE_SOURCE_DIR}/host/base/hash.c)',
     'compiles host/base/hash.c, a source of libsbx'),
    ('plugins/local/CMakeLists.txt',
     'target_sources(sbx_provider_local PRIVATE ../docker/paths.c)',
     'compiles plugins/docker/paths.c, a source of plugins/docker'),
    ('host/CMakeLists.txt',
     'target_sources(sbx PRIVATE ${CMAKE_SOURCE_DIR}/plugins/common/base64.c)',
     'compiles plugins/common/base64.c, a source of plugins/common'),
    ('agent/CMakeLists.txt',
     'target_sources(sbx_agent PRIVATE ${CMAKE_SOURCE_DIR}/plugins/common/confine.c)',
     'compiles plugins/common/confine.c'),
    ('host/cli/CMakeLists.txt',
     'target_sources(sbx_cli PRIVATE ${CMAKE_SOURCE_DIR}/host/base/hash.c)',
     'compiles host/base/hash.c, a source of libsbx, into host/cli'),
]


def check(root):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = include_rules.Checker(root).run()
    return rc, out.getvalue()


def main(src):
    status = 0
    with tempfile.TemporaryDirectory(prefix='sbx-include-rules.') as tmp:
        for d in include_rules.SCANNED:
            shutil.copytree(os.path.join(src, d), os.path.join(tmp, d), symlinks=True)
        rc, out = check(tmp)
        if rc != 0:
            print('FAIL: the pristine copy does not pass:\n' + out)
            return 1
        print('pristine copy passes: ' + out.strip())
        for rel, line, expected in CASES:
            path = os.path.join(tmp, rel)
            existed = os.path.exists(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'a') as f:
                f.write(line + '\n')
            rc, out = check(tmp)
            if rc == 0:
                print('FAIL: not caught: %r in %s' % (line, rel))
                status = 1
            elif expected not in out:
                print('FAIL: %r in %s: expected %r, got:\n%s' % (line, rel, expected, out))
                status = 1
            else:
                print('caught: %s: %s' % (rel, line))
            if existed:
                shutil.copyfile(os.path.join(src, rel), path)
            else:
                os.remove(path)
    if status == 0:
        print('every planted violation was caught (%d)' % len(CASES))
    return status


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__.split('\n', 1)[0])
    sys.exit(main(sys.argv[1]))
