// simba_free: memory the library returns as `char *` is freed here, with the
// library's own allocator, never with the host's free().
#include <cstdlib>

#include "simba.h"

extern "C" {

void simba_free(void* p) { std::free(p); }

}  // extern "C"
