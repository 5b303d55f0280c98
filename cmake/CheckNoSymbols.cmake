# cmake -DNM=<nm> -DLIB=<archive or object> -DREGEX=<regex> [-DWHAT=<text>] -P CheckNoSymbols.cmake
#
# Fails if LIB refers to (has undefined) any symbol matching REGEX. Used by the
# ctest 'core_is_pure' to keep src/core free of libuv and backend clients.
foreach(_v NM LIB REGEX)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "CheckNoSymbols.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(NOT DEFINED WHAT)
  set(WHAT "forbidden symbols")
endif()

execute_process(COMMAND "${NM}" -u "${LIB}"
  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -u ${LIB} failed (${_rc}): ${_err}")
endif()

string(REPLACE "\n" ";" _lines "${_out}")
set(_bad "")
set(_member "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^(.*):$")
    set(_member "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^[ \t]*U[ \t]+(.+)$")
    set(_sym "${CMAKE_MATCH_1}")
    if(_sym MATCHES "${REGEX}")
      list(APPEND _bad "  ${_member}: ${_sym}")
    endif()
  endif()
endforeach()

if(_bad)
  list(JOIN _bad "\n" _bad)
  message(FATAL_ERROR "${LIB} uses ${WHAT}:\n${_bad}")
endif()
message(STATUS "OK: ${LIB} uses no ${WHAT}")
