#!/bin/sh
# Prints a dpkg symbols file for PACKAGE from a GNU ld version script: every
# global name under node NAME_X.Y gets minimum version X.Y, the version that
# added it (the node names follow the release that added them, ADR 0034).
#   gen-symbols.sh PACKAGE VERSION_SCRIPT
set -eu
pkg=$1 map=$2
# The soname: the library file the map belongs to (libsimba.map -> libsimba.so.1).
lib=$(basename "$map" .map)
major=$(sed -n 's/^project(simba VERSION \([0-9]*\)\..*/\1/p' "$(dirname "$0")/../CMakeLists.txt")
echo "$lib.so.$major $pkg #MINVER#"
echo "* Build-Depends-Package: $(echo "$pkg" | sed 's/[0-9]*$//')-dev"
# Strip comments, then walk the nodes: "NODE {", "global:", names, "local:", "};".
sed 's:/\*.*\*/::; /\/\*/,/\*\//d' "$map" | awk '
  /^[A-Z_]+_[0-9]+\.[0-9]+ *\{/ { node = $1; sub(/\{.*/, "", node); ver = node;
                                   sub(/^[A-Z_]+_/, "", ver);
                                   printf " %s@%s %s\n", node, node, ver; next }
  /local:/ { node = ""; next }
  node != "" && /^[ \t]*[a-z_][a-z0-9_]*;/ { name = $1; sub(/;$/, "", name);
                                             printf " %s@%s %s\n", name, node, ver }'
