#include "backend/backend_parts.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <random>

namespace simba {

std::string random_session_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  thread_local std::random_device device;
  std::string id;
  id.reserve(32);
  for (int word = 0; word < 4; ++word) {
    const uint32_t bits = static_cast<uint32_t>(device());
    for (int shift = 28; shift >= 0; shift -= 4) id.push_back(kHex[(bits >> shift) & 0xfu]);
  }
  return id;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

void enable_keepalive(int fd) {
  const int on = 1, idle = 5, interval = 2, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

std::vector<std::string> resolved_addresses(int status, const struct addrinfo* res) {
  std::vector<std::string> addrs;
  for (const struct addrinfo* ai = status == 0 ? res : nullptr; ai; ai = ai->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (ai->ai_family == AF_INET) {
      uv_ip4_name(reinterpret_cast<const struct sockaddr_in*>(ai->ai_addr), buf, sizeof buf);
    } else if (ai->ai_family == AF_INET6) {
      uv_ip6_name(reinterpret_cast<const struct sockaddr_in6*>(ai->ai_addr), buf, sizeof buf);
    }
    const std::string a = buf;
    if (!a.empty() && std::find(addrs.begin(), addrs.end(), a) == addrs.end()) addrs.push_back(a);
  }
  return addrs;
}

}  // namespace simba
