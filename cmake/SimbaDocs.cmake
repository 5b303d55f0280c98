# The `docs` target: the API reference from include/simba.h and include/simba/tck.h
# with Debian's doxygen (docs/api/Doxyfile.in), warnings as errors, into
# build/docs/api/html (never committed). Without doxygen the target says so.
find_program(SIMBA_DOXYGEN doxygen)
configure_file("${PROJECT_SOURCE_DIR}/docs/api/Doxyfile.in" "${PROJECT_BINARY_DIR}/docs/api/Doxyfile" @ONLY)
if(SIMBA_DOXYGEN)
  add_custom_target(docs
    COMMAND "${SIMBA_DOXYGEN}" "${PROJECT_BINARY_DIR}/docs/api/Doxyfile"
    COMMAND ${CMAKE_COMMAND} -E echo "API reference: ${PROJECT_BINARY_DIR}/docs/api/html/index.html"
    DEPENDS "${PROJECT_SOURCE_DIR}/include/simba.h" "${PROJECT_SOURCE_DIR}/include/simba/tck.h"
    COMMENT "API reference (doxygen, warnings as errors)"
    VERBATIM)
else()
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo "doxygen not found: apt-get install doxygen"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
endif()
