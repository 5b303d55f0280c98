// The library's version (simba_version, simba_version_string): what bindings
// compare with the SIMBA_VERSION_* macros of the header they were built with.
#include "simba.h"

extern "C" {

unsigned simba_version(void) {
  return (SIMBA_VERSION_MAJOR << 16) | (SIMBA_VERSION_MINOR << 8) | SIMBA_VERSION_PATCH;
}

#define SIMBA_STR2(x) #x
#define SIMBA_STR(x) SIMBA_STR2(x)
const char* simba_version_string(void) {
  return SIMBA_STR(SIMBA_VERSION_MAJOR) "." SIMBA_STR(SIMBA_VERSION_MINOR) "." SIMBA_STR(
      SIMBA_VERSION_PATCH);
}

}  // extern "C"
