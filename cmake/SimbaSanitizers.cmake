# SIMBA_SANITIZE: "" | address | thread.
#
# The flags go on everything built in this tree (library, tests, header checks)
# so that instrumented and uninstrumented code never mix inside one binary.
#   address: ASan + UBSan, any UB report is fatal (-fno-sanitize-recover=all)
#   thread:  TSan
# Both compile at -O1 (after the build type's -O2, so it wins): what the
# sanitizers' authors recommend for useful stacks, and it builds about a third
# faster, which CI pays twice.
# SIMBA_TEST_ENVIRONMENT holds the runtime options every test gets (TSan reads
# cmake/tsan.supp, LeakSanitizer cmake/lsan.supp: each entry there says why it is
# not our bug).

set(SIMBA_TEST_ENVIRONMENT "")
set(SIMBA_TEST_TIMEOUT_FACTOR 1)

if(SIMBA_SANITIZE STREQUAL "")
  # plain build
elseif(SIMBA_SANITIZE STREQUAL "address")
  add_compile_options(-O1 -fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
  list(APPEND SIMBA_TEST_ENVIRONMENT
       "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1"
       "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/lsan.supp:print_suppressions=0"
       "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
       "SIMBA_SANITIZER=address")
  set(SIMBA_TEST_TIMEOUT_FACTOR 3)
elseif(SIMBA_SANITIZE STREQUAL "thread")
  add_compile_options(-O1 -fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  list(APPEND SIMBA_TEST_ENVIRONMENT
       "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${PROJECT_SOURCE_DIR}/cmake/tsan.supp"
       "SIMBA_SANITIZER=thread")
  set(SIMBA_TEST_TIMEOUT_FACTOR 5)
else()
  message(FATAL_ERROR "SIMBA_SANITIZE must be empty, 'address' or 'thread', not '${SIMBA_SANITIZE}'")
endif()

if(SIMBA_SANITIZE AND SIMBA_VALGRIND)
  message(STATUS "SIMBA_VALGRIND ignored: valgrind does not run sanitized binaries")
  set(SIMBA_VALGRIND OFF CACHE BOOL "" FORCE)
endif()
