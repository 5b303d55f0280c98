// The lease-name rule of the seed, checked before any backend sees a name.
#ifndef SIMBA_CORE_NAMES_H
#define SIMBA_CORE_NAMES_H

#include <string>
#include <string_view>

namespace simba {

// 1-128 characters of [A-Za-z0-9._:-], other than "." and "..". Returns an empty
// string when valid, else the reason (naming the rule).
std::string check_lease_name(std::string_view name);

}  // namespace simba

#endif
