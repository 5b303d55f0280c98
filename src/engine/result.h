// The engine's outcome of a call. capi maps it to simba.h's SIMBA_E* codes, in
// one place (capi/errors.cpp): the engine knows nothing of the ABI's values.
#ifndef SIMBA_ENGINE_RESULT_H
#define SIMBA_ENGINE_RESULT_H

#include <string>

namespace simba::engine {

enum class Code {
  kOk,
  kEInval,
  kEState,
  kEExpired,
  kETimedOut,
  kEBackend,
  kEClosed,
  kENoMem,
  kEWouldBlock,
  kEBusy,
  kEUnsupported,
  kECanceled,
};

struct Result {
  Code code = Code::kOk;
  std::string detail;
  static Result ok() { return {}; }
};

}  // namespace simba::engine

#endif
