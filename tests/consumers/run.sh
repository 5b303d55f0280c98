#!/usr/bin/env bash
# Consumers of an installed Simba (ctest 'consumers', label abi, plain build):
#   1. `cmake --install BUILD --prefix TMP`;
#   2. a C program built with only `pkg-config --cflags --libs simba`;
#   3. the same for the fencing kit: simba-tck.pc; and a CMake project with
#      find_package(simba CONFIG REQUIRED) linking simba::simba and simba::simba_tck;
#   4. a C program that dlopen()s libsimba.so.1 and runs an election through
#      dlsym()'d functions, built with the header only;
#   5. README.md's "Twenty lines of C", built with pkg-config, leading then stopping.
# Everything happens in a temp dir, removed at exit.
#
#   run.sh BUILD_DIR        (CC and CMAKE_COMMAND may be set; default cc, cmake)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
CC=${CC:-cc}
CMAKE=${CMAKE_COMMAND:-cmake}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/simba-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

step() { printf '\n---- %s\n' "$*"; }

step "install into $prefix"
"$CMAKE" --install "$BUILD" --prefix "$prefix" >"$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libsimba.so.1' -print -quit)")
pcdir=$(dirname "$(find "$prefix" -name simba.pc -print -quit)")
[[ -f "$libdir/libsimba.so.1" && -f "$pcdir/simba.pc" && -f "$pcdir/simba-tck.pc" ]] || {
  echo "FAIL: the install lacks libsimba.so.1, simba.pc or simba-tck.pc"; cat "$tmp/install.log"; exit 1; }
[[ -f "$prefix/include/simba.h" && -f "$prefix/include/simba/tck.h" ]] || {
  echo "FAIL: the install lacks include/simba.h or include/simba/tck.h"; exit 1; }
export PKG_CONFIG_PATH="$pcdir"
# The installed libraries carry no rpath: the loader finds them like a system's.
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "pkg-config: simba $(pkg-config --modversion simba), simba-tck $(pkg-config --modversion simba-tck)"
# shellcheck disable=SC2046  # word splitting of pkg-config's flags is the point
"$CC" -std=c99 -Wall -Wextra -pedantic -Werror "$HERE/consumer_pkgconfig.c" \
  $(pkg-config --cflags --libs simba) -o "$tmp/pkgconfig_consumer"
"$tmp/pkgconfig_consumer"

# The kit has its own pkg-config file, which requires simba (tck.h includes
# simba.h): the CMake consumer's program, which also calls libsimba, built with
# simba-tck alone.
[[ "$(pkg-config --print-requires simba-tck)" == "simba = $(pkg-config --modversion simba)" ]] || {
  echo "FAIL: simba-tck.pc does not require simba of the same version:" \
    "'$(pkg-config --print-requires simba-tck)'"; exit 1; }
# shellcheck disable=SC2046
"$CC" -std=c99 -Wall -Wextra -pedantic -Werror -D_POSIX_C_SOURCE=200809L "$HERE/cmake/main.c" \
  $(pkg-config --cflags --libs simba-tck) -lpthread -o "$tmp/pkgconfig_tck_consumer"
"$tmp/pkgconfig_tck_consumer"

step "find_package(simba CONFIG REQUIRED)"
"$CMAKE" -S "$HERE/cmake" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$CC" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
"$CMAKE" --build "$tmp/cmake-build" >"$tmp/cmake-build.log" 2>&1 ||
  { cat "$tmp/cmake-build.log"; exit 1; }
"$tmp/cmake-build/cmake_consumer"

step "dlopen(libsimba.so.1)"
"$CC" -std=c99 -Wall -Wextra -pedantic -Werror -I"$prefix/include" "$HERE/consumer_dlopen.c" \
  -ldl -o "$tmp/dlopen_consumer"
if readelf -d "$tmp/dlopen_consumer" | grep -q 'libsimba'; then
  echo "FAIL: the dlopen consumer links libsimba at build time"; exit 1
fi
"$tmp/dlopen_consumer"

step "README.md's twenty lines of C"
# The example a newcomer copies first: built with pkg-config as the README says,
# it leads for a second, then stops and prints the revoke reason by its name.
awk '/^## Twenty lines of C/ { on = 1 } on && /^```c$/ { code = 1; next }
     code && /^```$/ { exit } code { print }' "$HERE/../../README.md" >"$tmp/readme_example.c"
[[ -s "$tmp/readme_example.c" ]] || { echo "FAIL: no C block under README.md's 'Twenty lines of C'"; exit 1; }
# shellcheck disable=SC2046
"$CC" -std=c99 -Wall -Wextra -Wno-unused-parameter -Werror "$tmp/readme_example.c" \
  $(pkg-config --cflags --libs simba) -o "$tmp/readme_example"
out=$( (sleep 1; echo) | "$tmp/readme_example")
echo "$out"
grep -q '^leader of report with token [0-9]' <<<"$out" && grep -qx 'lost report (STOPPED)' <<<"$out" || {
  echo "FAIL: README.md's example did not lead and then print 'lost report (STOPPED)'"; exit 1; }

step "OK: all four consumers built and ran against the installed Simba"
