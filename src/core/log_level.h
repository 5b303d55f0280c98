// Log levels of the Effects::log / BackendContext::log lines: the values of the
// public SIMBA_LOG_* constants (pinned by a static_assert in src/capi).
#ifndef SIMBA_CORE_LOG_LEVEL_H
#define SIMBA_CORE_LOG_LEVEL_H

namespace simba {

constexpr int kLogDebug = 0, kLogInfo = 1, kLogWarn = 2, kLogError = 3;

}  // namespace simba

#endif
