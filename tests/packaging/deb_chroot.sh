#!/usr/bin/env bash
# deb_chroot.sh - the Debian packages as an operator gets them.
#
# Builds the packages by running the README's packager quick start as
# written (scripts/package.sh, dpkg-deb, lintian with no error) in a copy of
# the source tree under WORK, makes a fresh
# Debian bookworm root with `debootstrap --variant=minbase` (including only
# the system libraries the packages' Depends name, so missing Depends show
# up as a failed dpkg -i or a program that cannot start), installs them
# with dpkg and checks, through chroot:
#   - sbx + sbx-provider-docker alone: `sbx providers` lists exactly local
#     and docker, `sbx check` passes with docker enabled by its drop-in,
#     `sbx run -- echo hi` works on the local provider;
#   - `dpkg -r sbx-provider-docker` keeps the drop-in (a conffile), and
#     `sbx check` fails naming that file and the package; --purge
#     removes it and `sbx check` passes again;
#   - every package installed: `sbx providers` lists all six;
#   - examples/provider-template, as sbx-provider-dev installs it, built
#     with its own Makefile against the installed header only
#     (pkg-config sbx-provider of the root) and run through `sbx
#     conformance` there, with a JUnit report;
#   - with the test suite's Docker daemon (SBX_TEST_DOCKER_HOST and
#     SBX_TEST_DOCKER_IMAGE), `sbx run` on the installed docker provider
#     after the operator's edit of its drop-in;
# Nothing is kept between runs: WORK is removed first and at the end.
#
# usage: deb_chroot.sh SOURCE_DIR WORK
# env:   SBX_DEBIAN_MIRROR (default http://deb.debian.org/debian)
#        SBX_PACKAGING_NICE niceness of the package build and lintian
#        (default 10): they are most of this test's CPU (a whole build of
#        the tree) and must not take it from the tests beside it, whose
#        time bounds need it; nothing here is timed.
# (No `cmd | grep -q`: with pipefail, grep leaving early fails the pipe.)
set -uo pipefail
src=$1 work=$2
mirror=${SBX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
nice=${SBX_PACKAGING_NICE:-10}

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, dpkg --root)"
for t in debootstrap lintian help2man dpkg-deb chroot; do
    command -v "$t" >/dev/null || skip "$t is not installed (scripts/deps.sh test)"
done

fail() { echo "FAIL: $*" >&2; exit 1; }
root=$work/root
mounts=()
debootstrap_pid=
cleanup() {
    # A debootstrap still running (a failure beside it) ends first.
    if [ -n "$debootstrap_pid" ]; then
        kill "$debootstrap_pid" 2>/dev/null
        wait "$debootstrap_pid" 2>/dev/null
    fi
    # Unmount before removing: rm must never reach through a bind mount
    # into the docker daemon's directory.
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}"
    done
    rm -rf --one-file-system "$work"
}
# bind_same DIR: DIR of this machine at the same path inside the root.
bind_same() {
    mkdir -p "$root$1" && mount --bind "$1" "$root$1" || fail "bind $1 into the root"
    mounts+=("$root$1")
}
rm -rf --one-file-system "$work"
mkdir -p "$work"
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$EPOCHREALTIME
stamp() { awk -v a="$t0" -v b="$EPOCHREALTIME" -v m="$*" 'BEGIN { printf "[%5.1f s] %s\n", b - a, m }'; }

# 1. The packages, as the README's packager quick start builds them: its
# block run as written (tests/support/readme_blocks.sh) in a copy of the
# source tree without builds, so that every line of it is tried here
# (scripts/package.sh, dpkg-deb, lintian reporting no error).
. "$src/tests/support/readme_blocks.sh"
qs=$work/quickstart
n=$(readme_block_number "$src/README.md" "$qs" "Packager") ||
    fail "README Quick start has no Packager block"
mkdir -p "$work/tree"
tar -C "$src" --exclude=./build --exclude=./_install --exclude=./.git -cf - . |
    tar -C "$work/tree" -xf - || fail "copying the source tree"
# niced: its compilers and lintian (minutes of CPU) must not slow the
# tests beside it that measure time
(renice -n "$nice" -p "$BASHPID" >/dev/null; readme_run_block "$qs" "$n" "$work/tree" "$qs") \
    >"$work/package.log" 2>&1 ||
    { tail -80 "$work/package.log"; fail "the README's packager quick start (output above)"; }
grep -E '^(E|W): ' "$work/package.log" | sed 's/^/lintian: /'
stamp "packager quick start: packages built, lintian $(grep -c '^E: ' "$work/package.log") errors, $(grep -c '^W: ' "$work/package.log") warnings"
pkgbuild=$work/tree/build/pkg
debs=$pkgbuild/packages
deb() { echo "$debs/$1"_*.deb; }
for p in sbx libsbx1 libsbx-dev libsbx-conformance0 sbx-provider-dev sbx-provider-docker \
         sbx-provider-e2b sbx-provider-cube sbx-provider-opensandbox sbx-provider-daytona \
         sbx-provider-k8s; do
    [ -f "$(deb $p)" ] || fail "no package $p in $debs: $(ls "$debs")"
done
stamp "packages built"

# 2. A fresh root with the system libraries the packages depend on, made
# (it mostly waits on the mirror) while the packages are checked.
include=$(for d in "$debs"/*.deb; do dpkg-deb -f "$d" Depends; done | tr ',' '\n' |
          sed 's/(.*)//; s/|.*//; s/ //g' | grep -v '^$' |
          grep -v -x -e sbx -e 'libsbx1' -e 'libsbx-dev' -e 'libsbx-conformance0' |
          sort -u | paste -sd, -)
echo "debootstrap --include=$include"
debootstrap --variant=minbase --include="$include" bookworm "$root" "$mirror" \
    >"$work/debootstrap.log" 2>&1 &
debootstrap_pid=$!

# Every installed file belongs to a packaged component: an install() rule
# without COMPONENT would land in "Unspecified", which no package holds.
cmake --install "$pkgbuild" --component Unspecified --prefix "$work/unspecified" \
    >"$work/unspecified.log" 2>&1 || { cat "$work/unspecified.log"; fail "cmake --install"; }
if [ -d "$work/unspecified" ] && [ -n "$(find "$work/unspecified" ! -type d)" ]; then
    fail "installed by no package (install() without COMPONENT): $(find "$work/unspecified" ! -type d)"
fi

# The library as its package ships it: SONAME and versioned symbols.
mkdir "$work/x"
dpkg-deb -x "$(deb libsbx1)" "$work/x"
lib=$(echo "$work"/x/usr/lib/*/libsbx.so.1)
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libsbx.so.1 ] || fail "SONAME of libsbx is '$soname'"
unversioned=$(readelf --dyn-syms -W "$lib" | awk '$5 == "GLOBAL" && $7 != "UND" && $7 != "ABS" && $8 !~ /@@SBX_1$/ { print $8 }')
[ -z "$unversioned" ] || fail "libsbx exports symbols outside SBX_1: $unversioned"
syms=$(readelf --dyn-syms -W "$lib")
grep -q ' sbx_open@@SBX_1$' <<<"$syms" || fail "sbx_open@@SBX_1 not exported"

wait "$debootstrap_pid" || { debootstrap_pid=; tail -30 "$work/debootstrap.log"; fail "debootstrap"; }
debootstrap_pid=
stamp "debootstrap done"
mount -t proc proc "$root/proc" || fail "mount /proc in the root"
mounts+=("$root/proc")
mkdir "$root/debs"
cp "$debs"/*.deb "$root/debs/"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
dpkg_in() { in_root dpkg "$@" >>"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg $*"; }; }
rel() { echo "/debs/$(basename "$(deb "$1")")"; }
names() { in_root sbx providers --json | sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p' | sort | paste -sd' ' -; }

# 3. sbx and the docker provider, nothing else.
dpkg_in -i "$(rel libsbx1)" "$(rel libsbx-conformance0)" "$(rel sbx)" "$(rel sbx-provider-docker)"
got=$(names)
[ "$got" = "docker local" ] || fail "sbx providers lists '$got', want 'docker local'"
out=$(in_root sbx check 2>&1) || fail "sbx check: $out"
echo "$out"
grep -q '^ok  docker .*\[default\]  /usr/lib/.*/sbx/providers/docker.so$' <<<"$out" ||
    fail "docker is not the enabled default: $out"
out=$(in_root env SBX_PROVIDER=local sbx run -- echo hi 2>&1) || fail "sbx run: $out"
[ "$out" = hi ] || fail "sbx run -- echo hi printed '$out'"
in_root man -w sbx-run >/dev/null 2>&1 || [ -f "$root/usr/share/man/man1/sbx-run.1.gz" ] ||
    fail "no man page sbx-run(1)"
stamp "sbx + sbx-provider-docker: providers, check, run"

# 4b. The installed docker provider against a real daemon (the test
# suite's, when it runs one): the operator's edit of the drop-in, then a
# command in a container under the packaged sbx-agent. The daemon resolves
# bind sources on its own machine, so the socket, resource_dir and the
# agent are bound into the root at the same paths.
sock=${SBX_TEST_DOCKER_HOST:-}
sock=${sock#unix://}
if [ -n "${SBX_TEST_DOCKER_HOST:-}" ] && [ -S "$sock" ] && [ -n "${SBX_TEST_DOCKER_IMAGE:-}" ]; then
    bind_same "$(dirname "$sock")"
    mkdir -p "$work/shared/res"
    cp "$root"/usr/lib/*/sbx/providers/sbx-agent "$work/shared/sbx-agent"
    bind_same "$work/shared"
    cp "$root/etc/sbx/conf.d/docker.yaml" "$work/docker.yaml.orig"
    sed -i "s|^    # host: .*|    host: unix://$sock|
            s|^    # image: .*|    image: $SBX_TEST_DOCKER_IMAGE|
            s|^    # resource_dir: .*|    resource_dir: $work/shared/res|
            s|^    # agent: true .*|    agent_path: $work/shared/sbx-agent|" \
        "$root/etc/sbx/conf.d/docker.yaml"
    out=$(in_root sbx check 2>&1) || fail "sbx check with the edited drop-in: $out"
    out=$(in_root sbx run -- sh -c 'echo hi from $(cat /proc/1/comm)' 2>&1) ||
        fail "sbx run on docker: $out"
    [ "$out" = "hi from sbx-agent" ] || fail "sbx run on docker printed '$out'"
    stamp "docker: sbx run in a container of the test daemon, under the packaged agent"
else
    echo "docker: no SBX_TEST_DOCKER_HOST/SBX_TEST_DOCKER_IMAGE: not run against a daemon"
fi

# 4. Removed: the conffile stays and still enables docker.
dpkg_in -r sbx-provider-docker
[ -f "$root/etc/sbx/conf.d/docker.yaml" ] || fail "dpkg -r removed the conffile"
[ ! -e "$root/usr/lib/x86_64-linux-gnu/sbx/providers/docker.so" ] || fail "docker.so still there"
out=$(in_root sbx check 2>&1) && fail "sbx check passed with docker enabled but removed: $out"
echo "$out"
for want in 'provider "docker" is enabled in /etc/sbx/conf.d/docker.yaml:' \
            'not installed (package sbx-provider-docker)' \
            'dpkg --purge sbx-provider-docker'; do
    grep -qF "$want" <<<"$out" || fail "sbx check does not say '$want': $out"
done
got=$(names)
[ "$got" = "docker local" ] || fail "after dpkg -r, sbx providers lists '$got'"
dpkg_in --purge sbx-provider-docker
[ ! -e "$root/etc/sbx/conf.d/docker.yaml" ] || fail "dpkg --purge left the conffile"
out=$(in_root sbx check 2>&1) || fail "sbx check after the purge: $out"
grep -q '^ok  local ' <<<"$out" || fail "local is not the fallback after the purge: $out"
stamp "remove and purge"

# 5. Everything.
all=()
for d in "$debs"/*.deb; do all+=("/debs/$(basename "$d")"); done
dpkg_in -i "${all[@]}"
got=$(names)
[ "$got" = "cube daytona docker e2b k8s local opensandbox" ] || fail "sbx providers lists '$got'"
out=$(in_root sbx check 2>&1) || fail "sbx check with every package: $out"
stamp "every package"

# 6. The provider template, from the installed sbx-provider-dev, built
# with the installed header only (the root's pkg-config files).
tpl=$work/template
cp -r "$root/usr/share/doc/sbx-provider-dev/examples/provider-template" "$tpl" ||
    fail "sbx-provider-dev does not install the template"
pc=$(echo "$root"/usr/lib/*/pkgconfig)
PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$pc make -C "$tpl" CFLAGS="-O2 -Werror" >"$work/make.log" 2>&1 ||
    { cat "$work/make.log"; fail "make in the template"; }
grep -q -- "-I$root/usr/lib/" "$work/make.log" ||
    fail "the template was not built against the root's header: $(cat "$work/make.log")"
exported=$(nm -D --defined-only "$tpl/template.so" | awk '{ print $NF }')
[ "$exported" = sbx_provider_describe ] || fail "template.so exports: $exported"
# Its CMakeLists.txt, the same way.
PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$pc cmake -S "$tpl" -B "$work/template-cmake" \
    >"$work/cmake.log" 2>&1 && cmake --build "$work/template-cmake" >>"$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log"; fail "the template's CMake build"; }
[ -f "$work/template-cmake/template.so" ] || fail "the CMake build made no template.so"
mkdir -p "$root/tmp/tpl/ws"
cp "$tpl/template.so" "$root/tmp/tpl/"
printf 'providers:\n  template:\n    root: /tmp/tpl/ws\n' >"$root/tmp/tpl/sbx.yaml"
out=$(in_root env SBX_PLUGIN_PATH=/tmp/tpl \
      sbx --config /tmp/tpl/sbx.yaml conformance template --junit /tmp/tpl/conformance.xml 2>&1)
status=$?
echo "$out" | tail -1
[ "$status" -eq 0 ] || fail "sbx conformance template exited $status: $out"
grep -q '^[1-9][0-9]* passed, 0 failed' <<<"$out" || fail "conformance summary: $out"
grep -q '<testsuite name="sbx.conformance.template"' "$root/tmp/tpl/conformance.xml" ||
    fail "no JUnit report"
grep -q '<failure' "$root/tmp/tpl/conformance.xml" && fail "the JUnit report has failures"
stamp "provider template: conformance passed"
echo PASS
