# install(): libsimba.so.1 (+ namelinks), libsimba_tck.so.1 (the fencing test kit),
# libsimba.a, the public headers, simba.pc, simba-tck.pc, and the CMake package
# (find_package(simba CONFIG) -> simba::simba, simba::simba_tck).

include(CMakePackageConfigHelpers)

set(SIMBA_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/simba")

# The kit has an export set of its own (simbaTckTargets.cmake, included when
# present): Debian ships it in libsimba-tck-dev, apart from libsimba-dev.
install(TARGETS simba EXPORT simbaTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS simba_tck EXPORT simbaTckTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS simba_static
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")

# include/simba.h, and include/simba/*.h (the fencing test kit) when it exists.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  FILES_MATCHING PATTERN "*.h")

# pkg-config. Relocatable: prefix is found from the .pc file's own place (so
# `cmake --install --prefix DIR` works), unless GNUInstallDirs gave absolute dirs.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SIMBA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _rel "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" _rel "${_rel}")
  set(SIMBA_PC_PREFIX "\${pcfiledir}/${_rel}")
endif()
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(SIMBA_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(SIMBA_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
foreach(_pc simba simba-tck)
  configure_file("${PROJECT_SOURCE_DIR}/pkgconfig/${_pc}.pc.in"
                 "${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc"
    DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endforeach()

# CMake package.
install(EXPORT simbaTargets
  NAMESPACE simba::
  FILE simbaTargets.cmake
  DESTINATION "${SIMBA_CMAKE_INSTALL_DIR}")
install(EXPORT simbaTckTargets
  NAMESPACE simba::
  FILE simbaTckTargets.cmake
  DESTINATION "${SIMBA_CMAKE_INSTALL_DIR}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/simbaConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/simbaConfig.cmake"
  INSTALL_DESTINATION "${SIMBA_CMAKE_INSTALL_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/simbaConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/cmake/simbaConfig.cmake"
  "${PROJECT_BINARY_DIR}/cmake/simbaConfigVersion.cmake"
  DESTINATION "${SIMBA_CMAKE_INSTALL_DIR}")
