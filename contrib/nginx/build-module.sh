#!/usr/bin/env bash
# Build ngx_http_simba_module.so against Debian's nginx-dev, the way Debian builds
# its own dynamic modules (dh_nginx): nginx's ./configure with the flags the
# packaged nginx was built with (conf_flags, which include --with-compat) and
# --add-dynamic-module, then `make modules`. /usr/share/nginx/src is read-only to
# us: configure runs in BUILD_DIR, on symlinks to the sources.
#
#   build-module.sh NGINX_SRC MODULE_DIR BUILD_DIR INCLUDE_DIR LIB_DIR [INSTALL_RPATH]
#
# The module's RUNPATH is LIB_DIR (this build's libsimba.so.1), then
# $ORIGIN/INSTALL_RPATH: the installed libsimba seen from the installed module;
# `cmake --install` drops the first (contrib/nginx/CMakeLists.txt).
set -euo pipefail
NGINX_SRC=$1 MODULE_DIR=$2 BUILD_DIR=$3 INCLUDE_DIR=$4 LIB_DIR=$5 INSTALL_RPATH=${6:-}

for f in configure auto src conf_flags; do
  [[ -e "$NGINX_SRC/$f" ]] || { echo "build-module.sh: $NGINX_SRC/$f missing (Debian package nginx-dev)" >&2; exit 1; }
done
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
for f in configure auto src; do ln -sfn "$NGINX_SRC/$f" "$f"; done

# shellcheck disable=SC1091
. "$NGINX_SRC/conf_flags"   # NGX_CONF_FLAGS=( ... --with-compat ... )

export SIMBA_NGX_INCS="$INCLUDE_DIR"
# In a response file, which gcc reads itself: "$ORIGIN" would not survive the
# shell evals of nginx's configure and make.
rpath="$LIB_DIR${INSTALL_RPATH:+:\$ORIGIN/$INSTALL_RPATH}"
if [[ ! -f rpath.rsp || "$(cat rpath.rsp)" != "-Wl,-rpath,$rpath" ]]; then
  printf '%s\n' "-Wl,-rpath,$rpath" >rpath.rsp
  rm -f objs/ngx_http_simba_module.so # relink with it
fi
export SIMBA_NGX_LIBS="-L$LIB_DIR -lsimba @$BUILD_DIR/rpath.rsp"

# Configure again only when the module's config or the flags changed.
stamp="configure.stamp"
want="$(printf '%s\n' "${NGX_CONF_FLAGS[@]}" "$MODULE_DIR" "$INCLUDE_DIR" "$SIMBA_NGX_LIBS" | sha256sum)"
want="$want $(sha256sum "$MODULE_DIR/config" | cut -d' ' -f1)"
if [[ ! -f objs/Makefile || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  # Debian's own module builds pass dpkg-buildflags; these are the same hardening
  # flags, and nginx adds -W -Wall -Wpointer-arith -Wno-unused-parameter -Werror.
  ./configure \
    --with-cc-opt="-g -O2 -fPIC -fstack-protector-strong -Wformat -Werror=format-security -D_FORTIFY_SOURCE=2" \
    --with-ld-opt="-Wl,-z,relro -Wl,-z,now -fPIC" \
    "${NGX_CONF_FLAGS[@]}" \
    --add-dynamic-module="$MODULE_DIR" \
    --builddir=objs >configure.log 2>&1 || { tail -30 configure.log >&2; exit 1; }
  echo "$want" >"$stamp"
fi
# A parent make's jobserver does not reach this one: run it on its own.
unset MAKEFLAGS MFLAGS MAKELEVEL
make -f objs/Makefile modules
# Newer than libsimba even when nothing was relinked (it links libsimba.so.1
# dynamically), so that the build does not run this again.
touch objs/ngx_http_simba_module.so
