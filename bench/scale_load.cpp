// simba_scale_load: the load generator of the scale model (docs/benchmarks.md,
// "Scale model"; scripts/scale.sh runs it). It measures the lease server's own
// CPU time (utime + stime of /proc/PID/stat, of the server's pid and, with
// --tree, of its children: PostgreSQL's backends) per keep-alive, per acquire
// and release, and per acquire answered Held, with N sessions of L leases each.
//
// What it sends is what libsimba sends, byte for byte: it drives libsimba's own
// backend objects (src/backend/*, linked from libsimba.a through
// simba::make_backend), the objects a libsimba client's engine calls, on one
// libuv loop of its own, without the engine (which decides *when* to call;
// here the generator does, at a fixed rate). A keep-alive is the backend's
// keep_alive(), an acquire its acquire(), a release its release().
//
// One backend object holds --per-backend sessions (default 1: each session on
// a connection of its own, like N libsimba clients). PostgreSQL needs fewer
// objects than sessions: each object keeps two connections (commands and
// LISTEN) and the test server takes 100, so scripts/scale.sh puts up to 40
// objects there and several sessions on each (their calls go one at a time on
// the object's connection, as a client's do).
//
// ZooKeeper refuses more than maxClientCnxns (60) connections from one address.
// With --spread-source PORT the generator binds each outgoing connection to
// PORT on 127.0.0.1 to a source address of its own in 127.0.0.2-127.0.0.251
// (50 connections each), by interposing connect(); loopback accepts any of them.
//
// --rate renew drives each session once per renew interval (lease / 3, the
// default timing of src/core/config.cpp): N / (lease / 3) calls per second in
// all, the rate N nodes make at the default interval, so that the measured
// server CPU is the model's point itself rather than an extrapolation from a
// faster rate. Outside the measured windows every session whose last
// keep-alive is a renew interval old gets one, as a client's engine sends it: a
// long setup (10,000 sessions acquiring 10 leases each) outlasts a lease
// otherwise. The windows send nothing but their own calls.
//
// Phases, for each lease count of --leases (ascending; the sessions acquire
// more leases between them), each a window of --seconds after a warm-up:
//   ka     keep-alives at --rate per second in all, round robin, at most one in
//          flight per session (a client's keep-alive slot)
//   cycle  release then acquire again of each session's first lease, at --rate
//   held   (first lease count only) acquires of a name session 0 holds: a
//          candidate's attempt, answered Held
//   idle   (first lease count only) nothing sent for --idle-seconds: the cost of
//          idle sessions (ZooKeeper's client pings after a third of the session
//          timeout without a request)
// Before any connection the server's background CPU rate is measured for
// --idle-seconds and subtracted from every window (bg).
//
// Output: a table on stdout and, with --json FILE, one JSON object per lease
// count appended to FILE (a line each).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/backend_types.h"
#include "core/log_level.h"
#include "core/time.h"

using simba::Backend;
using simba::Duration;
using simba::Outcome;

// --- connect() interposer for ZooKeeper's per-address connection limit -------

static int g_spread_port = 0;  // host order; 0 = off
static unsigned g_spread_count = 0;

extern "C" __attribute__((visibility("default"))) int connect(int fd, const struct sockaddr* addr,
                                                              socklen_t len) {
  if (g_spread_port != 0 && addr && addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    if (ntohs(in->sin_port) == g_spread_port && ntohl(in->sin_addr.s_addr) == 0x7f000001u) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      src.sin_port = 0;
      src.sin_addr.s_addr = htonl(0x7f000002u + (g_spread_count++ / 50) % 250);
      (void)bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src);  // best effort
    }
  }
  return static_cast<int>(syscall(SYS_connect, fd, addr, len));
}

// --- server CPU ------------------------------------------------------------------

// The CPU time of each of the server's processes at one instant. PostgreSQL's
// backends come and go (the previous run's connections end, autovacuum workers
// start): a difference counts the processes alive at its end, each from the
// earlier reading or, if it started since, from zero. A process that ended in
// between is left out rather than counted negative.
struct ProcCpu {
  double stat_s = 0;   // utime + stime, /proc/PID/stat (clock ticks)
  double sched_s = 0;  // sum of /proc/PID/task/*/schedstat run time (ns): a cross-check
};
struct Cpu {
  std::map<int, ProcCpu> procs;
};
struct CpuDelta {
  double stat_s = 0, sched_s = 0;
};

static CpuDelta cpu_since(const Cpu& before, const Cpu& after) {
  CpuDelta d;
  for (const auto& [pid, now] : after.procs) {
    auto was = before.procs.find(pid);
    const ProcCpu from = was == before.procs.end() ? ProcCpu{} : was->second;
    d.stat_s += now.stat_s - from.stat_s;
    d.sched_s += now.sched_s - from.sched_s;
  }
  return d;
}

static bool read_stat(int pid, int* ppid, double* cpu_s) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');  // after the command name, which may hold spaces
  if (!p) return false;
  // fields from 3 (state): state ppid pgrp session tty tpgid flags minflt cminflt
  // majflt cmajflt utime stime
  char state;
  int pp;
  unsigned long long ut = 0, st = 0;
  if (sscanf(p + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &pp, &ut, &st) !=
      4)
    return false;
  if (ppid) *ppid = pp;
  if (cpu_s) *cpu_s = static_cast<double>(ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return true;
}

static double read_sched(int pid) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR* d = opendir(path);
  if (!d) return 0;
  double s = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char p2[320];
    snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", pid, e->d_name);
    FILE* f = fopen(p2, "r");
    if (!f) continue;
    unsigned long long ns = 0;
    if (fscanf(f, "%llu", &ns) == 1) s += static_cast<double>(ns) / 1e9;
    fclose(f);
  }
  closedir(d);
  return s;
}

static int g_server_pid = 0;
static bool g_tree = false;

static Cpu server_cpu() {
  Cpu c;
  double s = 0;
  if (read_stat(g_server_pid, nullptr, &s)) c.procs[g_server_pid] = {s, read_sched(g_server_pid)};
  if (g_tree) {
    DIR* d = opendir("/proc");
    while (d && (true)) {
      dirent* e = readdir(d);
      if (!e) break;
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      int pid = atoi(e->d_name), ppid = 0;
      if (pid == g_server_pid) continue;
      if (read_stat(pid, &ppid, &s) && ppid == g_server_pid) c.procs[pid] = {s, read_sched(pid)};
    }
    if (d) closedir(d);
  }
  return c;
}

static double self_cpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// --- the generator -------------------------------------------------------------------

struct Lease {
  std::string name;
  uint64_t token = 0;
  bool held = false;
};

struct Sess {
  Backend* b = nullptr;
  std::string id;
  std::vector<Lease> leases;
  bool busy = false;
  bool refreshing = false;  // a keep-alive of the refresh in flight
  double last_ka = 0;       // when the last keep-alive (or the open) was answered
};

struct Opts {
  std::string url;
  int sessions = 10;
  std::vector<int> leases{1, 10, 100};
  int per_backend = 1;
  double rate = 1500;
  bool rate_per_renew = false;  // --rate renew
  double seconds = 6;
  double warmup = 1;
  double idle_seconds = 4;
  int64_t lease_ms = 20000;
  std::string json;
  std::string label;
};

static uv_loop_t g_loop;
static std::vector<std::unique_ptr<Backend>> g_backends;
static std::vector<Sess> g_sess;
static int g_inflight = 0;
static long g_errors = 0;
static std::string g_last_error;
static Opts g_o;

static Duration timeout() { return simba::ms(30000); }

// The renew interval a client uses by default: lease / 3 (Config::renew_interval).
static double renew_s() { return static_cast<double>(g_o.lease_ms) / 3000.0; }

static void note_error(Outcome o, const std::string& e) {
  ++g_errors;
  g_last_error = std::string(simba::outcome_name(o)) + ": " + e;
}

// Runs the loop until pred() holds, or `limit` seconds pass. False on timeout.
static bool run_until(const std::function<bool()>& pred, double limit) {
  const double end = now_s() + limit;
  while (!pred()) {
    if (now_s() > end) return false;
    uv_run(&g_loop, UV_RUN_ONCE);
  }
  return true;
}

// Ticks every millisecond for the whole run: the loop never blocks longer.
static uv_timer_t g_tick;

static void sleep_loop(double secs) {
  const double end = now_s() + secs;
  while (now_s() < end) uv_run(&g_loop, UV_RUN_ONCE);
}

// Every call below keeps at most one in flight per session (busy), like a
// client's keep-alive slot, and counts completions.
static long g_done = 0;

// Any keep-alive's answer, measured or a refresh.
static void keep_alive_answered(int i, const simba::KeepAliveReply& r) {
  if (r.outcome == Outcome::kOk)
    g_sess[i].last_ka = now_s();
  else
    note_error(r.outcome, r.error);
}

static void do_keep_alive(int i) {
  Sess& s = g_sess[i];
  s.busy = true;
  ++g_inflight;
  s.b->keep_alive(s.id, simba::ms(g_o.lease_ms), timeout(), [i](const simba::KeepAliveReply& r) {
    g_sess[i].busy = false;
    --g_inflight;
    ++g_done;
    keep_alive_answered(i, r);
  });
}

// The refresh of idle sessions outside the windows (see the top of the file).
static bool g_refresh = true;
static int g_refresh_inflight = 0;
static uv_timer_t g_refresh_timer;

static void refresh_due(uv_timer_t*) {
  if (!g_refresh) return;
  const double stale = now_s() - renew_s();
  for (size_t i = 0; i < g_sess.size() && g_refresh_inflight < 512; ++i) {
    Sess& s = g_sess[i];
    if (s.id.empty() || s.refreshing || s.last_ka > stale) continue;
    s.refreshing = true;
    ++g_refresh_inflight;
    s.b->keep_alive(s.id, simba::ms(g_o.lease_ms), timeout(), [i](const simba::KeepAliveReply& r) {
      g_sess[i].refreshing = false;
      --g_refresh_inflight;
      keep_alive_answered(i, r);
    });
  }
}

// Stops the refresh for a measured window; its calls in flight are answered
// first, so that the window holds only its own.
static void refresh_off() {
  g_refresh = false;
  while (g_refresh_inflight > 0) uv_run(&g_loop, UV_RUN_ONCE);
}

static void do_acquire(int i, int j, Outcome want = Outcome::kOk) {
  Sess& s = g_sess[i];
  s.busy = true;
  ++g_inflight;
  s.b->acquire(s.id, s.leases[j].name, timeout(), [i, j, want](const simba::AcquireReply& r) {
    Sess& s = g_sess[i];
    s.busy = false;
    --g_inflight;
    ++g_done;
    if (r.outcome == Outcome::kOk) {
      s.leases[j].token = r.token;
      s.leases[j].held = true;
    }
    if (r.outcome != want) note_error(r.outcome, r.error.empty() ? "unexpected answer" : r.error);
  });
}

static void do_release(int i, int j) {
  Sess& s = g_sess[i];
  s.busy = true;
  ++g_inflight;
  s.leases[j].held = false;
  s.b->release(s.id, s.leases[j].name, s.leases[j].token, timeout(),
               [i](const simba::DoneReply& r) {
                 g_sess[i].busy = false;
                 --g_inflight;
                 ++g_done;
                 if (r.outcome != Outcome::kOk) note_error(r.outcome, r.error);
               });
}

// The name session 0 holds for the held phase.
static Lease g_contended;

struct Window {
  double secs = 0;
  long ops = 0;
  double cpu_stat = 0, cpu_sched = 0, cpu_self = 0;
};

// Issues op(i) at `rate` per second in all, round robin over the sessions that
// have nothing in flight, for warmup + seconds; measures the window after the
// warm-up.
static Window paced(const std::function<void(int)>& op, double rate, double warmup,
                    double seconds) {
  refresh_off();
  Window w;
  const int n = static_cast<int>(g_sess.size());
  int next = 0;
  double t0 = now_s();
  long issued = 0;
  bool measuring = false;
  Cpu c0{};
  double self0 = 0, m0 = 0;
  long done0 = 0;
  for (;;) {
    const double now = now_s();
    if (!measuring && now - t0 >= warmup) {
      measuring = true;
      c0 = server_cpu();
      self0 = self_cpu();
      m0 = now;
      done0 = g_done;
    }
    if (measuring && now - m0 >= seconds) {
      const Cpu c1 = server_cpu();
      w.secs = now - m0;
      w.ops = g_done - done0;
      const CpuDelta d = cpu_since(c0, c1);
      w.cpu_stat = d.stat_s;
      w.cpu_sched = d.sched_s;
      w.cpu_self = self_cpu() - self0;
      break;
    }
    const long due = static_cast<long>((now - t0) * rate) - issued;
    for (long k = 0, tried = 0; k < due && tried < n; ++tried) {
      const int i = next;
      next = (next + 1) % n;
      if (g_sess[i].busy) continue;
      op(i);
      ++issued;
      ++k;
      tried = -1;  // found one: scan again from the next
    }
    uv_run(&g_loop, UV_RUN_ONCE);
  }
  run_until([] { return g_inflight == 0; }, 60);
  g_refresh = true;
  return w;
}

// Every session once, at most `cap` in flight: a refresh between phases.
static void each_session(const std::function<void(int)>& op, int cap = 256) {
  const int n = static_cast<int>(g_sess.size());
  int i = 0;
  while (i < n || g_inflight > 0) {
    while (i < n && g_inflight < cap) op(i++);
    uv_run(&g_loop, UV_RUN_ONCE);
  }
}

static std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(sep, p);
    if (q == std::string::npos) q = s.size();
    out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

static void usage() {
  fprintf(stderr,
          "usage: simba_scale_load --url URL --server-pid PID [--tree] [--sessions N]\n"
          "         [--leases 1,10,100] [--per-backend S] [--rate OPS_PER_S|renew] [--seconds T]\n"
          "         [--warmup T] [--idle-seconds T] [--lease-ms MS] [--spread-source PORT]\n"
          "         [--label TEXT] [--json FILE]\n");
}

int main(int argc, char** argv) {
  Opts& o = g_o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "simba_scale_load: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--url")
      o.url = val();
    else if (a == "--server-pid")
      g_server_pid = atoi(val().c_str());
    else if (a == "--tree")
      g_tree = true;
    else if (a == "--sessions")
      o.sessions = atoi(val().c_str());
    else if (a == "--leases") {
      o.leases.clear();
      for (auto& x : split(val(), ',')) o.leases.push_back(atoi(x.c_str()));
      std::sort(o.leases.begin(), o.leases.end());
    } else if (a == "--per-backend")
      o.per_backend = atoi(val().c_str());
    else if (a == "--rate") {
      const std::string r = val();
      o.rate_per_renew = r == "renew";
      o.rate = o.rate_per_renew ? 1 : atof(r.c_str());
    } else if (a == "--seconds")
      o.seconds = atof(val().c_str());
    else if (a == "--warmup")
      o.warmup = atof(val().c_str());
    else if (a == "--idle-seconds")
      o.idle_seconds = atof(val().c_str());
    else if (a == "--lease-ms")
      o.lease_ms = atoll(val().c_str());
    else if (a == "--spread-source")
      g_spread_port = atoi(val().c_str());
    else if (a == "--label")
      o.label = val();
    else if (a == "--json")
      o.json = val();
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      fprintf(stderr, "simba_scale_load: unknown argument '%s'\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (o.url.empty() || g_server_pid <= 0 || o.sessions < 2 || o.per_backend < 1 ||
      o.leases.empty() || o.leases.front() < 1 || o.rate <= 0) {
    usage();
    return 2;
  }
  if (o.rate_per_renew) o.rate = o.sessions / renew_s();
  // A window sends no keep-alive but its own: every session must outlive it.
  if (o.warmup + o.seconds > 0.6 * static_cast<double>(o.lease_ms) / 1000.0) {
    fprintf(stderr, "simba_scale_load: --warmup + --seconds must stay under 0.6 x --lease-ms\n");
    return 2;
  }
  {
    // One connection per session: thousands of descriptors.
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  if (!read_stat(g_server_pid, nullptr, nullptr)) {
    fprintf(stderr, "simba_scale_load: no process %d\n", g_server_pid);
    return 2;
  }
  uv_loop_init(&g_loop);
  uv_timer_init(&g_loop, &g_tick);
  uv_timer_start(
      &g_tick, [](uv_timer_t*) {}, 1, 1);
  uv_timer_init(&g_loop, &g_refresh_timer);
  uv_timer_start(&g_refresh_timer, refresh_due, 200, 200);

  // The server's background, before any connection of ours.
  const Cpu b0 = server_cpu();
  const double bt0 = now_s();
  sleep_loop(o.idle_seconds);
  const Cpu b1 = server_cpu();
  const CpuDelta bg = cpu_since(b0, b1);
  const double bg_rate = bg.stat_s / (now_s() - bt0);
  const double bg_rate_sched = bg.sched_s / (now_s() - bt0);

  // The backend objects and the sessions.
  const int nb = (o.sessions + o.per_backend - 1) / o.per_backend;
  simba::BackendContext ctx;
  ctx.loop = &g_loop;
  ctx.client_name = "scale-load";
  ctx.log = [](int level, const std::string& line) {
    if (level >= simba::kLogWarn) fprintf(stderr, "backend: %s\n", line.c_str());
  };
  for (int b = 0; b < nb; ++b) {
    simba::BackendError why = simba::BackendError::kNone;
    std::string err;
    auto be = simba::make_backend(ctx, o.url, &why, &err);
    if (!be) {
      fprintf(stderr, "simba_scale_load: %s\n", err.c_str());
      return 2;
    }
    g_backends.push_back(std::move(be));
  }
  g_sess.resize(o.sessions);
  const double t_open = now_s();
  {
    int i = 0;
    while (i < o.sessions || g_inflight > 0) {
      while (i < o.sessions && g_inflight < 128) {
        Sess& s = g_sess[i];
        s.b = g_backends[i / o.per_backend].get();
        ++g_inflight;
        s.b->open_session(simba::ms(o.lease_ms), timeout(), [i](const simba::OpenReply& r) {
          --g_inflight;
          if (r.outcome != Outcome::kOk) {
            fprintf(stderr, "simba_scale_load: open_session: %s %s\n",
                    simba::outcome_name(r.outcome), r.error.c_str());
            exit(1);
          }
          g_sess[i].id = r.session_id;
          g_sess[i].last_ka = now_s();
        });
        ++i;
      }
      uv_run(&g_loop, UV_RUN_ONCE);
    }
  }
  const double open_s = now_s() - t_open;
  g_contended.name = "contended";
  {
    // Session 0 holds the contended name (its lease index -1 is kept apart).
    bool done = false;
    g_sess[0].b->acquire(g_sess[0].id, g_contended.name, timeout(),
                         [&done](const simba::AcquireReply& r) {
                           done = true;
                           if (r.outcome != Outcome::kOk) {
                             fprintf(stderr, "simba_scale_load: contended acquire: %s %s\n",
                                     simba::outcome_name(r.outcome), r.error.c_str());
                             exit(1);
                           }
                         });
    run_until([&done] { return done; }, 60);
  }

  printf("# simba_scale_load %s: %d sessions on %d backend objects, lease %" PRId64
         " ms, rate %.0f/s, window %.1f s; opened in %.2f s\n",
         o.label.c_str(), o.sessions, nb, o.lease_ms, o.rate, o.seconds, open_s);
  printf("# server background %.2f %% of a core (schedstat %.2f %%)\n", bg_rate * 100,
         bg_rate_sched * 100);
  printf("# %5s %6s %6s | %8s %8s %8s %6s | %8s %8s | %8s %8s | %9s | %7s\n", "N", "L", "setup",
         "ka/s", "ka us", "(sched)", "cpu %", "op/s", "op us", "held/s", "held us", "idle us/s",
         "client");
  fflush(stdout);

  int have = 0;
  bool first = true;
  for (int L : o.leases) {
    // Acquire leases up to L per session.
    const double ta = now_s();
    for (auto& s : g_sess) {
      for (int j = have; j < L; ++j) {
        Lease l;
        l.name = "n" + std::to_string(&s - g_sess.data()) + "." + std::to_string(j);
        s.leases.push_back(l);
      }
    }
    {
      long errors0 = g_errors;
      for (int j = have; j < L; ++j) each_session([j](int i) { do_acquire(i, j); });
      if (g_errors != errors0) {
        fprintf(stderr, "simba_scale_load: %ld acquires failed (%s)\n", g_errors - errors0,
                g_last_error.c_str());
        return 1;
      }
    }
    have = L;
    const double setup_s = now_s() - ta;
    each_session(do_keep_alive);  // refresh every session before the windows

    const long err0 = g_errors;
    Window ka = paced(do_keep_alive, o.rate, o.warmup, o.seconds);
    each_session(do_keep_alive);
    Window cy = paced(
        [](int i) {
          if (g_sess[i].leases[0].held)
            do_release(i, 0);
          else
            do_acquire(i, 0);
        },
        o.rate, o.warmup, o.seconds);
    // Every first lease held again.
    each_session([](int i) {
      if (!g_sess[i].leases[0].held) do_acquire(i, 0);
    });
    each_session(do_keep_alive);
    Window hd{}, idle{};
    if (first) {
      g_sess[0].busy = true;  // the holder sends nothing in this window
      hd = paced(
          [](int i) {
            Sess& s = g_sess[i];
            s.busy = true;
            ++g_inflight;
            s.b->acquire(s.id, g_contended.name, timeout(), [i](const simba::AcquireReply& r) {
              g_sess[i].busy = false;
              --g_inflight;
              ++g_done;
              if (r.outcome != Outcome::kHeld)
                note_error(r.outcome, r.error.empty() ? "not Held" : r.error);
            });
          },
          o.rate, o.warmup, o.seconds);
      g_sess[0].busy = false;
      each_session(do_keep_alive);
      refresh_off();
      const Cpu i0 = server_cpu();
      const double it0 = now_s();
      sleep_loop(o.idle_seconds);
      const Cpu i1 = server_cpu();
      g_refresh = true;
      idle.secs = now_s() - it0;
      const CpuDelta d = cpu_since(i0, i1);
      idle.cpu_stat = d.stat_s;
      idle.cpu_sched = d.sched_s;
      each_session(do_keep_alive);
    }
    const long errs = g_errors - err0;

    auto per = [bg_rate](const Window& w) {
      return w.ops > 0 ? (w.cpu_stat - bg_rate * w.secs) / static_cast<double>(w.ops) * 1e6 : 0;
    };
    auto per_sched = [bg_rate_sched](const Window& w) {
      return w.ops > 0 ? (w.cpu_sched - bg_rate_sched * w.secs) / static_cast<double>(w.ops) * 1e6
                       : 0;
    };
    auto rate_of = [](const Window& w) { return w.secs > 0 ? w.ops / w.secs : 0; };
    // Idle: server CPU per session per second above the background, in us.
    const double idle_us =
        idle.secs > 0 ? (idle.cpu_stat - bg_rate * idle.secs) / idle.secs / o.sessions * 1e6 : 0;
    const double client_us = ka.ops > 0 ? ka.cpu_self / ka.ops * 1e6 : 0;
    // The server's CPU over the keep-alive window above its background, as a
    // fraction of one core: at --rate renew, the model's point as measured.
    const double ka_cpu = ka.secs > 0 ? (ka.cpu_stat - bg_rate * ka.secs) / ka.secs : 0;
    char held_rate[32] = "-", held_us[32] = "-", idle_s[32] = "-";
    if (first) {
      snprintf(held_rate, sizeof held_rate, "%.0f", rate_of(hd));
      snprintf(held_us, sizeof held_us, "%.1f", per(hd));
      snprintf(idle_s, sizeof idle_s, "%.2f", idle_us);
    }
    printf("  %5d %6d %6.1f | %8.0f %8.1f %8.1f %6.2f | %8.0f %8.1f | %8s %8s | %9s | %7.1f%s\n",
           o.sessions, L, setup_s, rate_of(ka), per(ka), per_sched(ka), ka_cpu * 100, rate_of(cy),
           per(cy), held_rate, held_us, idle_s, client_us, errs ? "  ERRORS" : "");
    if (errs)
      fprintf(stderr, "simba_scale_load: %ld calls failed, last: %s\n", errs, g_last_error.c_str());
    fflush(stdout);
    if (!o.json.empty()) {
      FILE* f = fopen(o.json.c_str(), "a");
      if (f) {
        fprintf(
            f,
            "{\"label\":\"%s\",\"sessions\":%d,\"leases_per_session\":%d,\"backend_objects\":%d,"
            "\"lease_ms\":%" PRId64
            ",\"rate\":%.0f,\"bg_cpu_fraction\":%.5f,"
            "\"ka_per_s\":%.1f,\"ka_server_us\":%.2f,\"ka_server_us_schedstat\":%.2f,"
            "\"ka_window_s\":%.2f,\"ka_ops\":%ld,\"ka_server_cpu_s\":%.3f,"
            "\"ka_server_cpu_fraction\":%.5f,\"rate_per_renew\":%s,"
            "\"op_per_s\":%.1f,\"op_server_us\":%.2f,\"op_server_us_schedstat\":%.2f,"
            "\"op_ops\":%ld,\"held_per_s\":%.1f,\"held_server_us\":%.2f,\"held_ops\":%ld,"
            "\"idle_server_us_per_session_s\":%.3f,\"client_us_per_ka\":%.2f,"
            "\"setup_s\":%.2f,\"open_s\":%.2f,\"errors\":%ld,\"first\":%s}\n",
            o.label.c_str(), o.sessions, L, nb, o.lease_ms, o.rate, bg_rate, rate_of(ka), per(ka),
            per_sched(ka), ka.secs, ka.ops, ka.cpu_stat, ka_cpu,
            o.rate_per_renew ? "true" : "false", rate_of(cy), per(cy), per_sched(cy), cy.ops,
            rate_of(hd), per(hd), hd.ops, idle_us, client_us, setup_s, open_s, errs,
            first ? "true" : "false");
        fclose(f);
      }
    }
    first = false;
  }

  // Close every session and shut the backends down.
  refresh_off();
  uv_timer_stop(&g_refresh_timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&g_refresh_timer), nullptr);
  each_session([](int i) {
    Sess& s = g_sess[i];
    ++g_inflight;
    s.b->close_session(s.id, timeout(), [](const simba::DoneReply&) { --g_inflight; });
  });
  int left = static_cast<int>(g_backends.size());
  for (auto& b : g_backends) b->shutdown([&left] { --left; });
  run_until([&left] { return left == 0; }, 30);
  g_backends.clear();
  uv_timer_stop(&g_tick);
  uv_close(reinterpret_cast<uv_handle_t*>(&g_tick), nullptr);
  uv_run(&g_loop, UV_RUN_NOWAIT);
  return g_errors ? 1 : 0;
}
