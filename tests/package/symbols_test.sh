#!/usr/bin/env bash
# The Debian symbols file (ctest debian_symbols[_tck], label package): what
# debian/gen-symbols.sh makes from a version script names exactly the symbols
# the built library exports, each in its version node, with the node's version
# as its minimum. dpkg-gensymbols -c4 checks the same when the packages build.
#
#   symbols_test.sh SOURCE_DIR PACKAGE VERSION_SCRIPT LIBRARY
set -euo pipefail
src=$1 pkg=$2 map=$3 lib=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/simba-symbols.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

sh "$src/debian/gen-symbols.sh" "$pkg" "$map" >"$tmp/symbols"
head -n 1 "$tmp/symbols"
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[[ "$(head -n 1 "$tmp/symbols")" == "$soname $pkg #MINVER#" ]] || {
  echo "FAIL: the symbols file is not for $soname ($pkg)"; exit 1; }

# name@node from the symbols file; name@node from the library (node symbols are
# ABS objects named like their node).
sed -n 's/^ \([^ ]*\) [0-9.]*$/\1/p' "$tmp/symbols" | sort >"$tmp/from_map"
readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' |
  sed 's/@@*/@/; s/^\([A-Z_]*_[0-9.]*\)$/\1@\1/' | sort >"$tmp/from_lib"
if ! diff -u "$tmp/from_map" "$tmp/from_lib"; then
  echo "FAIL: the symbols from $(basename "$map") (-) and the exports of $(basename "$lib") (+) differ"
  exit 1
fi
# Each minimum version is its node's: simba_x@SIMBA_1.2 1.2.
bad=$(awk 'NR > 2 { split($1, a, "@"); v = a[2]; sub(/^[A-Z_]*_/, "", v); if (v != $2) print }' "$tmp/symbols")
[[ -z "$bad" ]] || { echo "FAIL: minimum versions that are not their node's:"; echo "$bad"; exit 1; }
echo "OK: $(wc -l <"$tmp/from_map") symbols of $soname, each with its node's minimum version"
