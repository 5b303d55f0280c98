// Pieces the networked backends (Redis, PostgreSQL, ZooKeeper) share: session
// ids, host names and their lookup, and the reconnect backoff. Kept here so
// that each rule has one place.
#ifndef SIMBA_BACKEND_BACKEND_PARTS_H
#define SIMBA_BACKEND_BACKEND_PARTS_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

struct addrinfo;

namespace simba {

// A session id: 128 bits read straight from std::random_device (no seeded
// engine shared between threads), as 32 lower-case hex digits. Throws when
// there is no random source.
std::string random_session_id();

// True for an IPv4 or IPv6 address literal: a host that needs no lookup.
bool is_ip_literal(const std::string& host);

// The distinct addresses of a uv_getaddrinfo answer, in its order; none when
// `status` is an error.
std::vector<std::string> resolved_addresses(int status, const struct addrinfo* res);

// TCP keep-alives on socket `fd`, so that a connection whose peer vanished (a
// host or network gone, no reset) dies in about 11 s instead of the system
// default's 2 hours: a connection that only listens (release broadcasts)
// would otherwise miss every message meanwhile.
void enable_keepalive(int fd);

// The wait before the next connection attempt after `failures` (>= 1)
// consecutive failures: 50 ms doubling up to 2 s.
inline uint64_t reconnect_backoff_ms(int failures) {
  const int doublings = failures < 1 ? 0 : failures > 7 ? 6 : failures - 1;
  return std::min<uint64_t>(2000, 50ull << doublings);
}

}  // namespace simba

#endif  // SIMBA_BACKEND_BACKEND_PARTS_H
