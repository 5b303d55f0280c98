// Minimal JSON text helpers for snapshots and event details.
#ifndef SIMBA_CORE_JSON_H
#define SIMBA_CORE_JSON_H

#include <string>
#include <string_view>

namespace simba {

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace simba

#endif
