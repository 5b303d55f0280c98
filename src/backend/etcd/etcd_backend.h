// etcd[s]://host[:port][/prefix]: the etcd backend (gRPC over HTTP/2 on the
// client's libuv loop; ADR 0044 for the transport, ADR 0045 for the mapping).
#ifndef SIMBA_BACKEND_ETCD_ETCD_BACKEND_H
#define SIMBA_BACKEND_ETCD_ETCD_BACKEND_H

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/etcd/etcd_url.h"

namespace simba {

// nullptr with `error` set when etcds://'s TLS files cannot be used.
std::unique_ptr<Backend> make_etcd_backend(const BackendContext& ctx, const EtcdUrl& url,
                                           std::string* error);

namespace etcd_impl {
// Tests only (etcd_test.cpp): runs between a release's read of the candidates
// of `name` and its handoff Txn, to race candidates against the Txn's guards.
extern std::function<void(const std::string& name)> test_before_handoff;
}  // namespace etcd_impl

}  // namespace simba

#endif
