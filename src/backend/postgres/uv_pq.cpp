#include "backend/postgres/uv_pq.h"

#include <sys/stat.h>

#include <algorithm>

namespace simba {

UvPq* UvPq::create(uv_loop_t* loop, Handlers handlers) {
  return new UvPq(loop, std::move(handlers));
}

UvPq::~UvPq() {
  if (result_) PQclear(result_);
  if (pg_) PQfinish(pg_);
}

bool UvPq::start(const std::vector<std::pair<std::string, std::string>>& options,
                 std::string* why) {
  std::vector<const char*> keys, values;
  for (const auto& kv : options) {
    keys.push_back(kv.first.c_str());
    values.push_back(kv.second.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  pg_ = PQconnectStartParams(keys.data(), values.data(), 0);
  if (!pg_) {
    *why = "out of memory";
    return false;
  }
  if (PQstatus(pg_) == CONNECTION_BAD) {
    *why = pq_error();
    return false;
  }
  // libpq prints notices (e.g. "... already exists, skipping") on stderr by
  // default: a library must not.
  PQsetNoticeProcessor(
      pg_, [](void*, const char*) {}, nullptr);
  state_ = State::kConnecting;
  // The first step waits until the socket is writable (the TCP connect done).
  if (!watch(UV_WRITABLE)) {
    *why = "cannot poll the connection's socket";
    state_ = State::kDead;
    return false;
  }
  return true;
}

void UvPq::send(uint64_t tag, const std::string& sql, std::vector<std::string> params, Mode mode,
                bool urgent) {
  if (state_ == State::kClosed || state_ == State::kDead) return;
  auto pos = queue_.end();
  if (urgent) {
    pos = std::find_if(queue_.begin(), queue_.end(), [](const Query& q) { return !q.urgent; });
  }
  queue_.insert(pos, Query{tag, sql, std::move(params), mode, urgent});
  send_next();
}

void UvPq::close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  queue_.clear();
  // The poll handle first, while its descriptor is still open.
  drop_poll();
  if (pg_) {
    PQfinish(pg_);
    pg_ = nullptr;
  }
  maybe_free();
}

void UvPq::on_poll(uv_poll_t* handle, int status, int events) {
  auto* p = reinterpret_cast<Poll*>(handle);
  UvPq* self = p->owner;
  if (p != self->poll_) return;
  // A poll error: let libpq look at the socket, so it sees the error itself.
  if (status < 0) events = UV_READABLE | UV_WRITABLE;
  if (self->state_ == State::kConnecting) {
    self->connect_step();
  } else if (self->state_ == State::kReady) {
    self->io((events & UV_READABLE) != 0, (events & UV_WRITABLE) != 0);
  }
}

void UvPq::connect_step() {
  switch (PQconnectPoll(pg_)) {
    case PGRES_POLLING_READING:
      if (!watch(UV_READABLE)) die("cannot poll the connection's socket");
      return;
    case PGRES_POLLING_WRITING:
      if (!watch(UV_WRITABLE)) die("cannot poll the connection's socket");
      return;
    case PGRES_POLLING_OK:
      break;
    default:
      die(pq_error());
      return;
  }
  if (PQsetnonblocking(pg_, 1) != 0) {
    die(pq_error());
    return;
  }
  state_ = State::kReady;
  if (!watch(UV_READABLE)) {
    die("cannot poll the connection's socket");
    return;
  }
  if (h_.on_ready) h_.on_ready();
  if (state_ == State::kReady) send_next();
}

void UvPq::io(bool readable, bool writable) {
  if (writable && want_write_ && !flush()) return;
  if (!readable) return;
  if (!PQconsumeInput(pg_)) {
    die(pq_error());
    return;
  }
  for (;;) {
    // Notifications first: one can arrive before the reply of the statement
    // that caused it.
    while (PGnotify* n = PQnotifies(pg_)) {
      const std::string channel = n->relname ? n->relname : "";
      const std::string payload = n->extra ? n->extra : "";
      PQfreemem(n);
      if (h_.on_notify) h_.on_notify(channel, payload);
      if (state_ != State::kReady) return;
    }
    if (!in_flight_ || PQisBusy(pg_)) break;
    if (PGresult* r = PQgetResult(pg_)) {
      // Several statements give several results: keep the first failure, or
      // else the last one.
      const bool kept_failed = result_ && PQresultStatus(result_) != PGRES_COMMAND_OK &&
                               PQresultStatus(result_) != PGRES_TUPLES_OK;
      if (kept_failed) {
        PQclear(r);
      } else {
        if (result_) PQclear(result_);
        result_ = r;
      }
      continue;
    }
    in_flight_ = false;
    PGresult* r = result_;
    result_ = nullptr;
    if (h_.on_result) h_.on_result(in_flight_tag_, r);
    if (r) PQclear(r);
    if (state_ != State::kReady) return;
    send_next();
    if (state_ != State::kReady) return;
  }
  if (PQstatus(pg_) == CONNECTION_BAD) die(pq_error());
}

void UvPq::send_next() {
  if (state_ != State::kReady || in_flight_ || queue_.empty()) return;
  Query q = std::move(queue_.front());
  queue_.pop_front();
  std::vector<const char*> values;
  for (const std::string& p : q.params) values.push_back(p.c_str());
  const int n = static_cast<int>(values.size());
  int ok = 0;
  switch (q.mode) {
    case Mode::kSimple:
      ok = PQsendQuery(pg_, q.sql.c_str());
      break;
    case Mode::kParams:
      ok = PQsendQueryParams(pg_, q.sql.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0);
      break;
    case Mode::kPrepared:
      ok = PQsendQueryPrepared(pg_, q.sql.c_str(), n, values.data(), nullptr, nullptr, 0);
      break;
  }
  if (!ok) {
    die(pq_error());
    return;
  }
  in_flight_ = true;
  in_flight_tag_ = q.tag;
  if (!flush()) return;
  if (h_.on_sent) h_.on_sent(q.tag);
}

bool UvPq::flush() {
  const int rc = PQflush(pg_);
  if (rc < 0) {
    die(pq_error());
    return false;
  }
  want_write_ = rc == 1;
  if (!watch(UV_READABLE | (want_write_ ? UV_WRITABLE : 0))) {
    die("cannot poll the connection's socket");
    return false;
  }
  return true;
}

void UvPq::die(const std::string& why) {
  if (state_ == State::kDead || state_ == State::kClosed) return;
  state_ = State::kDead;
  drop_poll();
  if (h_.on_dead) h_.on_dead(why);
}

bool UvPq::watch(int events) {
  const int fd = PQsocket(pg_);
  if (fd < 0) {
    drop_poll();
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  if (!poll_ || fd != fd_ || st.st_ino != ino_ || st.st_dev != dev_) {
    // A new socket (or the first): a new poll handle for it.
    drop_poll();
    auto* p = new Poll;
    p->owner = this;
    if (uv_poll_init(loop_, &p->handle, fd) != 0) {
      delete p;
      return false;
    }
    ++polls_open_;
    poll_ = p;
    fd_ = fd;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    events_ = 0;
  }
  if (events != events_) {
    events_ = events;
    if (uv_poll_start(&poll_->handle, events, on_poll) != 0) return false;
  }
  return true;
}

void UvPq::drop_poll() {
  if (!poll_) return;
  Poll* p = poll_;
  poll_ = nullptr;
  fd_ = -1;
  events_ = 0;
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle), [](uv_handle_t* h) {
    auto* closed = reinterpret_cast<Poll*>(h);
    UvPq* owner = closed->owner;
    delete closed;
    --owner->polls_open_;
    owner->maybe_free();
  });
}

void UvPq::maybe_free() {
  if (state_ != State::kClosed || polls_open_ > 0) return;
  auto closed = std::move(h_.on_closed);
  delete this;
  if (closed) closed();
}

std::string UvPq::pq_error() const {
  std::string s = pg_ ? PQerrorMessage(pg_) : "no connection";
  // libpq's messages may span lines ("connection to server ... failed: ...").
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s.empty() ? "connection failed" : s;
}

}  // namespace simba
