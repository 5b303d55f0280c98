// zookeeper://host[:port][,host[:port]...][/chroot][?auth=digest:user:password]:
// the ZooKeeper backend (libzookeeper_st on the client's libuv loop). Data model:
// docs in zookeeper_backend_impl.h, docs/backends.md and docs/adr/0008.
#ifndef SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_BACKEND_H
#define SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_BACKEND_H

#include <memory>

#include "backend/backend.h"
#include "backend/zookeeper/zookeeper_url.h"

namespace simba {

std::unique_ptr<Backend> make_zookeeper_backend(const BackendContext& ctx, const ZookeeperUrl& url);

}  // namespace simba

#endif
