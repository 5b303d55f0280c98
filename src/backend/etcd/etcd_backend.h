// etcd[s]://host[:port][/prefix]: the etcd backend (gRPC over HTTP/2 on the
// client's libuv loop; ADR 0044 for the transport, ADR 0045 for the mapping).
#ifndef SIMBA_BACKEND_ETCD_ETCD_BACKEND_H
#define SIMBA_BACKEND_ETCD_ETCD_BACKEND_H

#include <memory>

#include "backend/backend.h"
#include "backend/etcd/etcd_url.h"

namespace simba {

// nullptr with `error` set when etcds://'s TLS files cannot be used.
std::unique_ptr<Backend> make_etcd_backend(const BackendContext& ctx, const EtcdUrl& url,
                                           std::string* error);

}  // namespace simba

#endif
