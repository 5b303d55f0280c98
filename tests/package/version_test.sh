#!/usr/bin/env bash
# One version (ctest version_agrees, label package): CMake's project(VERSION) is
# the version of the soname, the pkg-config files, the CMake package, the header,
# simba_version_string() (through `simba --version`), debian/changelog and every
# binding's metadata. Prints each place and fails on the first disagreement.
#
#   version_test.sh SOURCE_DIR BUILD_DIR VERSION LIBSIMBA LIBSIMBA_TCK [SIMBA_CLI]
set -euo pipefail
src=$1 build=$2 version=$3 lib=$4 libtck=$5 cli=${6:-}
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
patch=${rest#*.}
fails=0

check() {  # what expected actual
  if [[ "$2" == "$3" ]]; then
    printf 'ok    %-46s %s\n' "$1" "$3"
  else
    printf 'FAIL  %-46s %s (expected %s)\n' "$1" "${3:-<none>}" "$2"
    fails=$((fails + 1))
  fi
}

# The header's SIMBA_VERSION_* (what simba_version() returns).
hdr() { sed -n "s/^#define SIMBA_VERSION_$1 \([0-9]*\).*/\1/p" "$src/include/simba.h"; }
check "include/simba.h SIMBA_VERSION_*" "$version" "$(hdr MAJOR).$(hdr MINOR).$(hdr PATCH)"

# The libraries: SONAME lib*.so.MAJOR, file name lib*.so.MAJOR.MINOR.PATCH.
for l in "$lib" "$libtck"; do
  base=$(basename "$l")
  base=${base%%.so*}
  soname=$(readelf -d "$l" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
  check "$base SONAME" "$base.so.$major" "$soname"
  real=$(basename "$(readlink -f "$l")")
  check "$base file" "$base.so.$version" "$real"
done

# pkg-config files and the CMake package version file, as configured.
for pc in simba simba-tck; do
  check "pkgconfig/$pc.pc Version" "$version" \
    "$(sed -n 's/^Version: //p' "$build/pkgconfig/$pc.pc")"
done
check "cmake/simbaConfigVersion.cmake" "$version" \
  "$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/cmake/simbaConfigVersion.cmake")"

# simba_version_string(), as the tool prints it.
if [[ -n "$cli" ]]; then
  check "simba --version (simba_version_string)" "simba $version" "$("$cli" --version)"
fi

# debian/changelog: a native package, versioned like the project.
deb=$(sed -n '1s/^simba (\([^)]*\)).*/\1/p' "$src/debian/changelog")
check "debian/changelog" "$version" "$deb"

# Rust: the workspace version, the simba -> simba-sys dependency, Cargo.lock.
rust=$src/bindings/rust
check "bindings/rust/Cargo.toml workspace version" "$version" \
  "$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$rust/Cargo.toml")"
check "bindings/rust/simba -> simba-sys version" "$version" \
  "$(sed -n 's/^simba-sys = {.*version = "\([^"]*\)".*/\1/p' "$rust/simba/Cargo.toml")"
for crate in simba simba-sys; do
  check "bindings/rust/Cargo.lock $crate" "$version" \
    "$(awk -v c="$crate" '$0 == "name = \"" c "\"" { getline; gsub(/version = |"/, ""); print }' "$rust/Cargo.lock")"
done

# Java: the jar's manifest (bindings/java/CMakeLists.txt writes it), when built.
mf=$build/bindings/java/MANIFEST.MF
if [[ -f "$mf" ]]; then
  check "simba.jar Implementation-Version" "$version" \
    "$(sed -n 's/^Implementation-Version: \(.*\)/\1/p' "$mf" | tr -d '\r')"
fi

# Lua: one rockspec, simba-VERSION-REV.rockspec, whose version and tag agree.
mapfile -t rocks < <(cd "$src/bindings/lua" && ls simba-*.rockspec)
check "bindings/lua rockspecs" "1" "${#rocks[@]}"
rock=${rocks[0]}
rev=${rock#simba-"$version"-}
rev=${rev%.rockspec}
check "bindings/lua rockspec file" "simba-$version-$rev.rockspec" "$rock"
check "bindings/lua rockspec version" "$version-$rev" \
  "$(sed -n 's/^version = "\(.*\)"/\1/p' "$src/bindings/lua/$rock")"
check "bindings/lua rockspec source tag" "v$version" \
  "$(sed -n 's/^ *tag = "\(.*\)",/\1/p' "$src/bindings/lua/$rock")"

# Go: versions are git tags (bindings/go/vX.Y.Z); from 2 on the module path ends in /vN.
gomod=$(sed -n 's/^module //p' "$src/bindings/go/go.mod")
if ((major >= 2)); then
  check "bindings/go/go.mod module path" "/v$major" "/${gomod##*/}"
else
  check "bindings/go/go.mod module path (v0/v1: no /vN)" "no" \
    "$([[ "$gomod" =~ /v[0-9]+$ ]] && echo yes || echo no)"
fi

# Python and Node (issues 39, 40): their metadata, once the bindings exist.
if [[ -f "$src/bindings/python/pyproject.toml" ]]; then
  check "bindings/python/pyproject.toml version" "$version" \
    "$(sed -n '/^\[project\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$src/bindings/python/pyproject.toml")"
fi
if [[ -f "$src/bindings/node/package.json" ]]; then
  check "bindings/node/package.json version" "$version" \
    "$(sed -n 's/^  "version": "\(.*\)",*$/\1/p' "$src/bindings/node/package.json")"
fi

: "$minor" "$patch"
if ((fails > 0)); then
  echo "version_test: $fails place(s) disagree with project(VERSION) $version" \
    "(bump them together: docs/packaging.md)"
  exit 1
fi
echo "version_test: every place says $version"
