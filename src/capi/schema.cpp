// The schema-install API: the DDL a DBA installs for a backend, which needs no
// client (simba_backend_schema).
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "capi/capi.h"

using simba::capi::fail;
using simba::capi::guarded;

extern "C" {

int simba_backend_schema(const char* backend_url, char** out_text) {
  return guarded([&]() -> int {
    if (!out_text) return fail(SIMBA_EINVAL, "simba_backend_schema: out_text is NULL");
    *out_text = nullptr;
    if (!backend_url) return fail(SIMBA_EINVAL, "simba_backend_schema: backend URL is NULL");
    std::string text, error;
    simba::BackendError why = simba::BackendError::kNone;
    if (!simba::backend_schema_script(backend_url, &text, &why, &error)) {
      return fail(why == simba::BackendError::kUnsupported ? SIMBA_EUNSUPPORTED : SIMBA_EINVAL,
                  error);
    }
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (!out) return fail(SIMBA_ENOMEM, "out of memory");
    std::memcpy(out, text.c_str(), text.size() + 1);
    *out_text = out;
    return SIMBA_OK;
  });
}

}  // extern "C"
