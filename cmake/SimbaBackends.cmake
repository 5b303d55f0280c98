# Optional backends. Each SIMBA_WITH_<NAME> defaults to ON when its client library
# is found, and only:
#   - adds the compile definition SIMBA_WITH_<NAME>=1 (to the library and the tests),
#   - adds src/backend/<dir>/*.cpp to the library (none yet is fine),
#   - links the client library.
# Outputs: SIMBA_BACKEND_DEFINITIONS, SIMBA_BACKEND_SOURCES, SIMBA_BACKEND_LIBRARIES,
# SIMBA_STATIC_HIREDIS / SIMBA_HIREDIS_STATIC, SIMBA_PC_LIBS_PRIVATE (for simba.pc),
# SIMBA_ETCD_PB_DIR (the etcd backend's generated protobuf-c code).

set(SIMBA_BACKEND_DEFINITIONS "")
set(SIMBA_BACKEND_SOURCES "")
set(SIMBA_BACKEND_LIBRARIES "")
set(SIMBA_PC_LIBS_PRIVATE "")

# Redis: hiredis (pkg-config 'hiredis').
pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
option(SIMBA_WITH_REDIS "Build the redis:// backend (hiredis)" ${HIREDIS_FOUND})

# PostgreSQL: libpq (pkg-config 'libpq').
pkg_check_modules(LIBPQ QUIET IMPORTED_TARGET libpq)
option(SIMBA_WITH_POSTGRES "Build the postgresql:// backend (libpq)" ${LIBPQ_FOUND})

# ZooKeeper: the single-threaded C client; it has no pkg-config file.
find_path(ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZOOKEEPER_LIBRARY zookeeper_st)
if(ZOOKEEPER_INCLUDE_DIR AND ZOOKEEPER_LIBRARY)
  set(ZOOKEEPER_FOUND TRUE)
else()
  set(ZOOKEEPER_FOUND FALSE)
endif()
option(SIMBA_WITH_ZOOKEEPER "Build the zookeeper:// backend (libzookeeper_st)" ${ZOOKEEPER_FOUND})

# etcd: gRPC over HTTP/2 with libnghttp2, messages by protobuf-c from
# src/backend/etcd/etcd_rpc.proto compiled by protoc-c at build time (ADR 0044).
pkg_check_modules(ETCD_DEPS QUIET IMPORTED_TARGET libnghttp2 libprotobuf-c)
find_program(SIMBA_PROTOC_C protoc-c)
if(ETCD_DEPS_FOUND AND SIMBA_PROTOC_C)
  set(ETCD_FOUND TRUE)
else()
  set(ETCD_FOUND FALSE)
endif()
option(SIMBA_WITH_ETCD "Build the etcd:// backend (libnghttp2, protobuf-c)" ${ETCD_FOUND})

# simba_enable_backend(<NAME> <dir> <found> <library> <how-to-install>)
macro(simba_enable_backend name dir found library hint)
  if(SIMBA_WITH_${name})
    if(NOT ${found})
      message(FATAL_ERROR "SIMBA_WITH_${name}=ON but its client library was not found (${hint})")
    endif()
    list(APPEND SIMBA_BACKEND_DEFINITIONS SIMBA_WITH_${name}=1)
    file(GLOB _simba_backend_src CONFIGURE_DEPENDS
         "${PROJECT_SOURCE_DIR}/src/backend/${dir}/*.cpp")
    list(SORT _simba_backend_src)
    list(APPEND SIMBA_BACKEND_SOURCES ${_simba_backend_src})
    list(APPEND SIMBA_BACKEND_LIBRARIES ${library})
  endif()
endmacro()

simba_enable_backend(REDIS redis HIREDIS_FOUND PkgConfig::HIREDIS "apt-get install libhiredis-dev")
simba_enable_backend(POSTGRES postgres LIBPQ_FOUND PkgConfig::LIBPQ "apt-get install libpq-dev")

if(SIMBA_WITH_ZOOKEEPER AND ZOOKEEPER_FOUND AND NOT TARGET simba_zookeeper_st)
  add_library(simba_zookeeper_st UNKNOWN IMPORTED)
  set_target_properties(simba_zookeeper_st PROPERTIES
    IMPORTED_LOCATION "${ZOOKEEPER_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZOOKEEPER_INCLUDE_DIR}")
endif()
simba_enable_backend(ZOOKEEPER zookeeper ZOOKEEPER_FOUND simba_zookeeper_st
                     "apt-get install libzookeeper-st-dev")

simba_enable_backend(ETCD etcd ETCD_FOUND PkgConfig::ETCD_DEPS
                     "apt-get install libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler")
# The generated messages: SIMBA_ETCD_PB_DIR holds etcd_rpc.pb-c.h.
if(SIMBA_WITH_ETCD)
  set(SIMBA_ETCD_PB_DIR "${PROJECT_BINARY_DIR}/generated/etcd")
  add_custom_command(
    OUTPUT "${SIMBA_ETCD_PB_DIR}/etcd_rpc.pb-c.c" "${SIMBA_ETCD_PB_DIR}/etcd_rpc.pb-c.h"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${SIMBA_ETCD_PB_DIR}"
    COMMAND "${SIMBA_PROTOC_C}" "--c_out=${SIMBA_ETCD_PB_DIR}"
            "--proto_path=${PROJECT_SOURCE_DIR}/src/backend/etcd"
            "${PROJECT_SOURCE_DIR}/src/backend/etcd/etcd_rpc.proto"
    DEPENDS "${PROJECT_SOURCE_DIR}/src/backend/etcd/etcd_rpc.proto"
    COMMENT "protoc-c etcd_rpc.proto")
  list(APPEND SIMBA_BACKEND_SOURCES "${SIMBA_ETCD_PB_DIR}/etcd_rpc.pb-c.c")
endif()

# SIMBA_STATIC_HIREDIS: libsimba.so carries its own hiredis, from Debian's static
# libhiredis.a (PIC), when it is there (ADR 0021; the top-level CMakeLists.txt
# links it).
if(SIMBA_WITH_REDIS)
  find_library(SIMBA_HIREDIS_STATIC NAMES libhiredis.a HINTS ${HIREDIS_LIBRARY_DIRS})
  if(SIMBA_HIREDIS_STATIC)
    set(_simba_static_hiredis_default ON)
  else()
    set(_simba_static_hiredis_default OFF)
  endif()
  option(SIMBA_STATIC_HIREDIS "Link hiredis statically into libsimba.so (libhiredis.a)"
         ${_simba_static_hiredis_default})
else()
  set(SIMBA_STATIC_HIREDIS OFF)
endif()

# As plain flags, not Requires.private: pkg-config resolves Requires.private
# even for --cflags, which would make `pkg-config --cflags simba` fail on a
# machine without these -dev packages although the shared library does not
# need them. Linking libsimba.a statically may need the backends' own
# `pkg-config --static --libs` flags (libpq's TLS libraries, for one).
if(SIMBA_WITH_REDIS)
  string(APPEND SIMBA_PC_LIBS_PRIVATE " -lhiredis")
endif()
if(SIMBA_WITH_POSTGRES)
  string(APPEND SIMBA_PC_LIBS_PRIVATE " -lpq")
endif()
if(SIMBA_WITH_ZOOKEEPER)
  string(APPEND SIMBA_PC_LIBS_PRIVATE " -lzookeeper_st")
endif()
if(SIMBA_WITH_ETCD)
  string(APPEND SIMBA_PC_LIBS_PRIVATE " -lnghttp2 -lprotobuf-c")
endif()
