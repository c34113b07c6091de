#!/usr/bin/env bash
# npm_ci.sh PKG_DIR BUILD_DIR WORK - give WORK the npm packages pinned by
# PKG_DIR/package-lock.json: WORK/package.json and package-lock.json are
# copies, WORK/node_modules links to one install of that lockfile.
#
# Each lockfile is installed (npm ci) once, into
# ${SBX_TEST_NPM_DIR:-BUILD_DIR/npm}/<sha256 of the lockfile>, under a lock,
# so that the tests sharing a lockfile (a provider's SDK fidelity and
# contract tests, the MCP tests, ...) and, when scripts/test.sh points
# SBX_TEST_NPM_DIR at one directory, both builds' tests install it once
# instead of once each. An install is used only once it is complete (it is
# moved into place at the end); a changed lockfile gets a new directory.
set -euo pipefail
pkg=$1 build=$2 work=$3
store=${SBX_TEST_NPM_DIR:-$build/npm}
mkdir -p "$store" "$work"
hash=$(sha256sum "$pkg/package-lock.json" | cut -c1-16)
dest="$store/$hash"
(
  flock 9
  if [ ! -d "$dest/node_modules" ]; then
    tmp=$(mktemp -d "$store/.install.XXXXXX")
    chmod 755 "$tmp"
    cp "$pkg/package.json" "$pkg/package-lock.json" "$tmp/"
    (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error) || { rm -rf "$tmp"; exit 1; }
    mv "$tmp" "$dest"
  fi
) 9>"$store/.$hash.lock"
# Copied only when changed, and renamed into place: a test of the same WORK
# may be running and reading them.
for f in package.json package-lock.json; do
  if ! cmp -s "$pkg/$f" "$work/$f"; then
    cp "$pkg/$f" "$work/.$f.$$" && mv -f "$work/.$f.$$" "$work/$f"
  fi
done
# A real directory from an older layout is replaced by the link.
if [ -d "$work/node_modules" ] && [ ! -L "$work/node_modules" ]; then
  rm -rf "$work/node_modules"
fi
if [ "$(readlink "$work/node_modules" 2>/dev/null)" != "$dest/node_modules" ]; then
  ln -sfn "$dest/node_modules" "$work/node_modules"
fi
