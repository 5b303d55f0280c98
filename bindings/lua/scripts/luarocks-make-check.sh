#!/bin/sh
# `luarocks make` with Debian's luarocks installs the rockspec (ctest
# lua_luarocks_make, issue 45): in a copy of bindings/lua (luarocks builds in the
# source dir), into a temp tree, against this build's libsimba; then lua5.4 loads
# simba and simba.luv from that tree.
#   luarocks-make-check.sh LUA_EXE LUA_SRC_DIR SIMBA_INCDIR SIMBA_LIBDIR VERSION
set -eu
lua=$1 src=$2 incdir=$3 libdir=$4 version=$5
command -v luarocks >/dev/null || { echo "SKIP: luarocks not installed (Debian package luarocks)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/simba-luarocks.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/lua"
cd "$tmp/lua"
rm -f ./*.so src/*.o
luarocks --lua-version=5.4 --tree="$tmp/tree" make "simba-$version-1.rockspec" \
  SIMBA_INCDIR="$incdir" SIMBA_LIBDIR="$libdir"
luarocks --lua-version=5.4 --tree="$tmp/tree" list simba | grep -F "$version-1"
out=$("$lua" -e "
package.cpath = '$tmp/tree/lib/lua/5.4/?.so'
package.path = '$tmp/tree/share/lua/5.4/?.lua;' .. package.path
local simba = require 'simba'
assert(package.searchpath('simba', package.cpath), 'simba.so not in the tree')
print(simba.VERSION)")
[ "$out" = "$version" ] || { echo "FAIL: require 'simba' from the rocks tree gave '$out'"; exit 1; }
echo "OK: luarocks make installed simba $version-1; lua5.4 loads it from the tree"
