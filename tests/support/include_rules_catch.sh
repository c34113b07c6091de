#!/bin/sh
# include_rules_catch.sh SOURCE_DIR PYTHON - include_rules.py passes on a
# scratch copy of the tree, and fails on it with the expected message for
# each kind of violation planted in the copy (one at a time, undone after).
set -eu
src=$1
py=$2
check=$src/tests/support/include_rules.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-include-rules.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for d in host shared abi conformance plugins agent; do
    cp -R "$src/$d" "$tmp/$d"
done
status=0

out=$("$py" "$check" "$tmp" 2>&1) || { echo "FAIL: the pristine copy does not pass:"; echo "$out"; exit 1; }
echo "pristine copy passes: $out"

# plant FILE LINE EXPECTED [WHAT]: append LINE to FILE (created when
# missing), expect the check to fail with EXPECTED in its output, undo.
plant() {
    file=$1 line=$2 expected=$3
    existed=1
    [ -e "$tmp/$file" ] || existed=0
    mkdir -p "$(dirname "$tmp/$file")"
    printf '%s\n' "$line" >> "$tmp/$file"
    if out=$("$py" "$check" "$tmp" 2>&1); then
        echo "FAIL: not caught: '$line' in $file"
        status=1
    else
        case $out in
        *"$expected"*) echo "caught: $file: $line" ;;
        *) echo "FAIL: '$line' in $file: expected \"$expected\", got:"; echo "$out"; status=1 ;;
        esac
    fi
    if [ $existed = 1 ]; then
        cp "$src/$file" "$tmp/$file"
    else
        rm -f "$tmp/$file"
    fi
}

# host layers: a lower folder including a higher one
plant host/base/cancel.c '#include "config/config.h"' 'host/base may not include host/config'
plant host/config/config.c '#include "api/ctx.h"' 'host/config may not include host/api'
plant host/registry/loader.c '#include "api/exec_quiet.h"' 'host/registry may not include host/api'
plant host/api/ctx.c '#include "sessions/internal.h"' 'host/api may not include host/sessions'
plant host/api/ctx.c '#include "store/store.h"' 'host/api may not include host/store'
plant host/store/rows.c '#include "config/config.h"' 'host/store may not include host/config'
plant host/store/rows.c '#include "sessions/internal.h"' 'host/store may not include host/sessions'
# a bare include inside host/ names the same folder or shared/
plant host/api/ctx.c '#include "text_escape.h"' 'inside host/ a bare include is of the same folder or shared/'
# host/ holds layer folders only; a new folder needs a row
plant host/stray.c '#include "base/cancel.h"' 'host/ holds only layer folders'
plant host/extra/new.c '#include "base/cancel.h"' 'its folder has no row in the include table'
# the sbx command: public headers (and shared/) only
plant host/cli/main.c '#include "config/config.h"' 'host/cli may not include host/config'
plant host/cli/main.c '#include <sbx/provider.h>' 'host/cli may not include abi'
# the public headers: each other and abi/ only
plant host/include/sbx/sbx.h '#include "hex.h"' 'host/include/sbx may not include shared'
plant host/include/sbx/sbx.h '#include "registry/registry.h"' 'host/include/sbx may not include host/registry'
# shared/: nothing of host/, plugins/, agent/
plant shared/hex.c '#include <sbx/sbx.h>' 'shared may not include host/include/sbx'
plant shared/hex.c '#include "confine.h"' 'shared may not include plugins/common'
plant shared/hex.c '#include "agent.h"' 'shared may not include agent'
# plugins: no host/, no other plugin; plugins/common no plugin
plant plugins/local/exec.c '#include <sbx/sbx.h>' 'plugins/local may not include host/include/sbx'
plant plugins/local/exec.c '#include "store/store.h"' 'plugins/local may not include host/store'
plant plugins/local/exec.c '#include "docker.h"' 'plugins/local may not include plugins/docker'
plant plugins/local/exec.c '#include "e2b_core.h"' 'plugins/local may not include plugins/e2bproto'
plant plugins/local/exec.c '#include "proto.h"' 'plugins/local may not include agent'
plant plugins/docker/exec.c '#include "e2bproto.h"' 'plugins/docker may not include plugins/e2bproto'
plant plugins/common/base64.c '#include "e2b_core.h"' 'plugins/common may not include plugins/e2bproto'
plant plugins/e2bproto/api.c '#include "local.h"' 'plugins/e2bproto may not include plugins/local'
# agent/: shared/ only
plant agent/conn.c '#include "confine.h"' 'agent may not include plugins/common'
plant agent/conn.c '#include <sbx/sbx.h>' 'agent may not include host/include/sbx'
# resolution by existence: nowhere, or in two places
plant plugins/local/exec.c '#include "no_such_header.h"' 'no such file in the tree'
plant plugins/local/hex.h '/* a second hex.h */' 'is ambiguous'
# no source of one component compiled into another
plant plugins/local/CMakeLists.txt 'target_sources(sbx_provider_local PRIVATE ${CMAKE_SOURCE_DIR}/host/base/hash.c)' 'compiles host/base/hash.c, a source of libsbx'
plant plugins/local/CMakeLists.txt 'target_sources(sbx_provider_local PRIVATE ../docker/paths.c)' 'compiles plugins/docker/paths.c, a source of plugins/docker'
plant host/CMakeLists.txt 'target_sources(sbx PRIVATE ${CMAKE_SOURCE_DIR}/plugins/common/base64.c)' 'compiles plugins/common/base64.c, a source of plugins/common'
plant agent/CMakeLists.txt 'target_sources(sbx_agent PRIVATE ${CMAKE_SOURCE_DIR}/plugins/common/confine.c)' 'compiles plugins/common/confine.c'
plant host/cli/CMakeLists.txt 'target_sources(sbx_cli PRIVATE ${CMAKE_SOURCE_DIR}/host/base/hash.c)' 'compiles host/base/hash.c, a source of libsbx, into host/cli'

[ $status = 0 ] && echo "every planted violation was caught"
exit $status
