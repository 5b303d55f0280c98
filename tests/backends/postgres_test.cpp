// postgresql:// specifics: URL parsing and password redaction; the schema
// (custom schema, create=false, the DDL a DBA applies, clients racing to create
// it); a session row deleted and a holder rewritten behind the client's back; a
// statement hung on a row lock, cut at the call timeout; N sessions racing for
// one name under READ COMMITTED; TLS with the test script's self-signed
// certificate; a server stopped (SIGSTOP) past the lease and a server restarted;
// passwords absent from logs; releases and closes committed asynchronously, and
// a crash right after such a release (ADR 0023).
//
// The URL tests need no server. Most others use SIMBA_TEST_POSTGRES_URL
// (skipped when unset). Those that stop, restart or reconfigure a server use one
// of their own, made once per test binary (initdb takes a second) and stopped
// at exit. PostgreSQL is poked with a plain synchronous libpq connection.
#ifdef SIMBA_WITH_POSTGRES

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/postgres/postgres_schema.h"
#include "backend/postgres/postgres_url.h"
#include "backends/backend_on_loop.h"
#include "backends/simba_testing.h"
#include "simba.h"

namespace {

using namespace simba_testing;

// --- helpers -----------------------------------------------------------------

std::string shared_url() {
  const char* u = std::getenv("SIMBA_TEST_POSTGRES_URL");
  return u && *u ? u : "";
}

// `url` with `params` added to its query string.
std::string with_params(const std::string& url, const std::string& params) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + params;
}

// A schema name of this test only.
std::string unique_schema(const std::string& what) {
  std::string s = "t_" + what + "_" + unique_id();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s.substr(0, 48);
}

// A synchronous libpq connection, for poking at the server.
class PgSync {
 public:
  // `url` may carry our own parameters (schema=, create=): they are taken out.
  explicit PgSync(const std::string& url) {
    simba::PostgresUrl u;
    std::string err;
    if (!simba::parse_postgres_url(url, &u, &err)) return;
    std::vector<const char*> keys, values;
    for (const auto& kv : u.options) {
      keys.push_back(kv.first.c_str());
      values.push_back(kv.second.c_str());
    }
    keys.push_back("connect_timeout");
    values.push_back("5");
    keys.push_back(nullptr);
    values.push_back(nullptr);
    c_ = PQconnectdbParams(keys.data(), values.data(), 0);
    if (c_)
      PQsetNoticeProcessor(
          c_, [](void*, const char*) {}, nullptr);
  }
  ~PgSync() {
    if (c_) PQfinish(c_);
  }
  PgSync(const PgSync&) = delete;
  PgSync& operator=(const PgSync&) = delete;
  bool ok() const { return c_ && PQstatus(c_) == CONNECTION_OK; }
  std::string error() const { return c_ ? PQerrorMessage(c_) : "no connection"; }
  // Runs `sql` with text parameters; returns the first value of the first row
  // ("" when none), or "!" + the error.
  std::string q(const std::string& sql, const std::vector<std::string>& params = {}) {
    if (!ok()) return "!not connected: " + error();
    std::vector<const char*> v;
    for (const auto& p : params) v.push_back(p.c_str());
    PGresult* r = PQexecParams(c_, sql.c_str(), static_cast<int>(v.size()), nullptr, v.data(),
                               nullptr, nullptr, 0);
    std::string out;
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      out = std::string("!") + PQresultErrorMessage(r);
    } else if (PQntuples(r) > 0 && PQnfields(r) > 0) {
      out = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return out;
  }
  // Every row's values, joined with '|', one string per row.
  std::vector<std::string> rows(const std::string& sql,
                                const std::vector<std::string>& params = {}) {
    std::vector<std::string> out;
    if (!ok()) return out;
    std::vector<const char*> v;
    for (const auto& p : params) v.push_back(p.c_str());
    PGresult* r = PQexecParams(c_, sql.c_str(), static_cast<int>(v.size()), nullptr, v.data(),
                               nullptr, nullptr, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
      for (int i = 0; i < PQntuples(r); ++i) {
        std::string row;
        for (int j = 0; j < PQnfields(r); ++j)
          row += (j ? "|" : "") + std::string(PQgetvalue(r, i, j));
        out.push_back(row);
      }
    }
    PQclear(r);
    return out;
  }
  // Runs a script of several statements (simple protocol); "" or "!" + error.
  std::string script(const std::string& sql) {
    if (!ok()) return "!not connected";
    PGresult* r = PQexec(c_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    std::string out = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK
                          ? ""
                          : std::string("!") + PQresultErrorMessage(r);
    PQclear(r);
    return out;
  }

 private:
  PGconn* c_ = nullptr;
};

// The directory of initdb and postgres ("" if not installed).
std::string pg_bindir() {
  std::string dir;
  if (FILE* p = popen("pg_config --bindir 2>/dev/null", "r")) {
    char buf[512];
    if (fgets(buf, sizeof buf, p)) dir = buf;
    pclose(p);
  }
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  struct stat st;
  if (dir.empty() || stat((dir + "/initdb").c_str(), &st) != 0 ||
      stat((dir + "/postgres").c_str(), &st) != 0) {
    return "";
  }
  return dir;
}

// A PostgreSQL server of the test binary's own: initdb once, then started,
// stopped, signalled and restarted on the same port and data by the tests. As
// root it runs as the `postgres` system user (PostgreSQL refuses root).
class OwnServer {
 public:
  static OwnServer* get() {
    static OwnServer* server = [] {
      auto* s = new OwnServer;
      s->setup_ok_ = s->setup();
      return s;
    }();
    return server;
  }
  static void shutdown() {
    OwnServer* s = get();
    s->stop();
    if (!s->dir_.empty()) {
      const std::string rm = "rm -rf '" + s->dir_ + "'";
      if (std::system(rm.c_str()) != 0) {
        // A leftover temp dir; nothing more to do.
      }
    }
  }

  // Leaves the server running at the end of a test, whatever happened.
  struct Resume {
    explicit Resume(OwnServer* s) : s(s) { s->ensure_running(); }
    ~Resume() { s->ensure_running(); }
    OwnServer* s;
  };
  void ensure_running() {
    signal(SIGCONT);
    if (pid_ <= 0) start();
  }

  bool usable() const { return setup_ok_; }
  const std::string& why() const { return why_; }

  bool start() {
    if (pid_ > 0) return true;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      const std::string log = dir_ + "/postgres.log";
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<std::string> args;
      if (as_postgres_) {
        args = {"setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"};
      }
      const std::vector<std::string> server = {bindir_ + "/postgres",
                                               "-D",
                                               dir_ + "/data",
                                               "-p",
                                               port,
                                               "-k",
                                               dir_,
                                               "-c",
                                               "listen_addresses=127.0.0.1",
                                               "-c",
                                               "fsync=off",
                                               "-c",
                                               "synchronous_commit=off",
                                               "-c",
                                               "full_page_writes=off"};
      args.insert(args.end(), server.begin(), server.end());
      // A later -c of the same setting wins.
      for (const std::string& kv : extra_settings_) {
        args.push_back("-c");
        args.push_back(kv);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(&a[0]);
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    return wait_for([&] { return PgSync(admin_url()).ok(); }, 20'000, 20);
  }
  // Signals the postmaster and every process it started (each backend is in a
  // session of its own, so SIGSTOP on the postmaster alone stops nothing that
  // serves an open connection).
  void signal(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);  // first, so that it starts no new backend meanwhile
    for (pid_t child : children()) kill(child, sig);
  }
  // Stops the server: a fast shutdown (SIGINT), or an immediate one (SIGQUIT,
  // crash recovery at the next start).
  void stop(int sig = SIGINT) {
    if (pid_ <= 0) return;
    signal(SIGCONT);
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  // A crash: SIGKILL to the postmaster and every process it started, so that
  // nothing flushes the WAL still in shared memory (crash recovery at the next
  // start). The postmaster is stopped first, so that it starts no process
  // meanwhile, and killed last: once it is gone its children are no longer
  // its children, and one that cannot notice (a stopped one) would live on
  // attached to the shared memory, which a new postmaster refuses to reuse.
  void crash() {
    if (pid_ <= 0) return;
    kill(pid_, SIGSTOP);
    for (pid_t child : children()) kill(child, SIGKILL);
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  // Settings added to the command line from the next start() on.
  void set_extra_settings(std::vector<std::string> settings) {
    extra_settings_ = std::move(settings);
  }

  std::string admin_url() const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";
  }
  int port() const { return port_; }
  // The processes whose parent is the postmaster (from /proc/PID/stat).
  std::vector<pid_t> children() const {
    std::vector<pid_t> out;
    DIR* d = opendir("/proc");
    if (!d) return out;
    while (struct dirent* e = readdir(d)) {
      const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
      if (pid <= 0) continue;
      FILE* f = std::fopen(("/proc/" + std::string(e->d_name) + "/stat").c_str(), "r");
      if (!f) continue;
      char buf[512] = {0};
      const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
      std::fclose(f);
      // "pid (comm) state ppid ...": comm may hold spaces, so parse after ')'.
      const char* close = std::strrchr(buf, ')');
      if (n == 0 || !close) continue;
      char state = 0;
      long ppid = 0;
      if (std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && ppid == pid_) {
        out.push_back(pid);
      }
    }
    closedir(d);
    return out;
  }

  // The role that needs a password (scram-sha-256).
  std::string password_url(const std::string& password) const {
    return "postgresql://simba_pw:" + password + "@127.0.0.1:" + std::to_string(port_) +
           "/postgres";
  }
  static constexpr const char* kPassword = "S3cr3t-pw_4711";

 private:
  bool setup() {
    bindir_ = pg_bindir();
    if (bindir_.empty()) {
      why_ = "PostgreSQL server binaries not found (pg_config --bindir)";
      return false;
    }
    // Under the test script's server dir when there is one, so that its
    // stop_servers also stops this server if the test binary dies first.
    const char* parent = std::getenv("SIMBA_SERVERS_DIR");
    std::string tmpl = std::string(parent && *parent ? parent : "/tmp") + "/simba-pg-test.XXXXXX";
    if (!mkdtemp(&tmpl[0])) {
      why_ = "mkdtemp failed";
      return false;
    }
    dir_ = tmpl;
    as_postgres_ = geteuid() == 0;
    std::string as;
    if (as_postgres_) {
      struct passwd* pw = getpwnam("postgres");
      if (!pw || chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        why_ = "running as root needs a `postgres` system user";
        return false;
      }
      as = "setpriv --reuid=postgres --regid=postgres --init-groups -- ";
    }
    chmod(dir_.c_str(), 0700);
    const std::string initdb = as + "'" + bindir_ + "/initdb' -D '" + dir_ +
                               "/data' -U postgres --auth=trust --no-sync --no-locale -E UTF8 >'" +
                               dir_ + "/initdb.log' 2>&1";
    if (std::system(initdb.c_str()) != 0) {
      why_ = "initdb failed (see " + dir_ + "/initdb.log)";
      return false;
    }
    // The superuser without a password; everyone else with scram-sha-256.
    const std::string hba = dir_ + "/data/pg_hba.conf";
    if (FILE* f = std::fopen(hba.c_str(), "w")) {
      std::fputs(
          "local all all trust\n"
          "host all postgres 127.0.0.1/32 trust\n"
          "host all all 127.0.0.1/32 scram-sha-256\n",
          f);
      std::fclose(f);
    }
    port_ = free_port();
    if (port_ <= 0 || !start()) {
      why_ = "cannot start postgres (see " + dir_ + "/postgres.log)";
      return false;
    }
    PgSync admin(admin_url());
    const std::string r =
        admin.q(std::string("CREATE ROLE simba_pw LOGIN PASSWORD '") + kPassword + "'");
    if (!r.empty()) {
      why_ = "cannot create the test role: " + r;
      return false;
    }
    admin.q("GRANT CREATE ON SCHEMA public TO simba_pw");
    return true;
  }

  std::string bindir_, dir_, why_;
  std::vector<std::string> extra_settings_;
  bool as_postgres_ = false;
  bool setup_ok_ = false;
  int port_ = -1;
  pid_t pid_ = -1;
};

// Stops the own server at exit (when a test started it).
class OwnServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (used) OwnServer::shutdown();
  }
  static bool used;
};
bool OwnServerEnvironment::used = false;
[[maybe_unused]] ::testing::Environment* const kOwnServerEnv =
    ::testing::AddGlobalTestEnvironment(new OwnServerEnvironment);

// The own server, or nullptr (the test is skipped with the reason).
#define OWN_SERVER_OR_SKIP(var)                                                          \
  OwnServerEnvironment::used = true;                                                     \
  OwnServer* var = OwnServer::get();                                                     \
  if (!var->usable()) GTEST_SKIP() << "no PostgreSQL server of our own: " << var->why(); \
  OwnServer::Resume resume_##var(var)

// --- URL parsing -----------------------------------------------------------------

TEST(PostgresUrl, DefaultsAndOurParametersTakenOut) {
  simba::PostgresUrl u;
  std::string err;
  ASSERT_TRUE(simba::parse_postgres_url("postgresql://db.example:6543/app", &u, &err)) << err;
  EXPECT_EQ(u.schema, "public");
  EXPECT_TRUE(u.create);
  EXPECT_EQ(u.option("host"), "db.example");
  EXPECT_EQ(u.option("port"), "6543");
  EXPECT_EQ(u.option("dbname"), "app");
  EXPECT_EQ(u.where(), "db.example:6543");

  ASSERT_TRUE(simba::parse_postgres_url(
      "postgres://al%40ice:p%3Ass@10.0.0.1/app?sslmode=require&schema=Tenant_1&create=false"
      "&application_name=x",
      &u, &err))
      << err;
  EXPECT_EQ(u.schema, "Tenant_1");
  EXPECT_FALSE(u.create);
  EXPECT_EQ(u.option("user"), "al@ice");
  EXPECT_EQ(u.option("password"), "p:ss");
  EXPECT_EQ(u.password, "p:ss");
  EXPECT_EQ(u.option("sslmode"), "require");
  EXPECT_EQ(u.option("application_name"), "x");
  EXPECT_EQ(u.option("schema"), "");  // never handed to libpq

  ASSERT_TRUE(simba::parse_postgres_url("postgresql://h1:1,h2:2/db?create=0&schema=s", &u, &err))
      << err;
  EXPECT_EQ(u.option("host"), "h1,h2");
  EXPECT_EQ(u.option("port"), "1,2");
  EXPECT_FALSE(u.create);

  ASSERT_TRUE(simba::parse_postgres_url("postgresql://[::1]:5433/db", &u, &err)) << err;
  EXPECT_EQ(u.option("host"), "::1");

  ASSERT_TRUE(simba::parse_postgres_url("postgresql:///db?host=/var/run/postgresql", &u, &err))
      << err;
  EXPECT_EQ(u.option("host"), "/var/run/postgresql");
}

TEST(PostgresUrl, BadUrlsAreInvalidAndNeverShowThePassword) {
  const char* bad[] = {
      "postgresql://u:hunter2@h/db?schema=",       // empty schema
      "postgresql://u:hunter2@h/db?schema=a-b",    // not an identifier
      "postgresql://u:hunter2@h/db?schema=1abc",   // starts with a digit
      "postgresql://u:hunter2@h/db?schema=a%22b",  // a quote
      "postgresql://u:hunter2@h/db?create=maybe",
      "postgresql://u:hunter2@h/db?nosuchoption=1",  // libpq refuses
      "postgresql://u:hunter2%zz@h/db",              // bad escape in the password
      "postgresql://h/db?password=hunter2&bogus=1",  // password in the query
      "postgresql://u:hunter2@h:port/db",
      "postgresql://u:hunter2@h:0/db",
      "postgresql://u:hunter2@h1:5432,h2:99999/db",
  };
  for (const char* url : bad) {
    simba::PostgresUrl u;
    std::string err;
    EXPECT_FALSE(simba::parse_postgres_url(url, &u, &err)) << url;
    EXPECT_FALSE(err.empty()) << url;
    EXPECT_EQ(err.find("hunter2"), std::string::npos) << url << " -> " << err;

    simba_client_t* c = nullptr;
    EXPECT_EQ(simba_client_open(&c, url, nullptr), SIMBA_EINVAL) << url;
    EXPECT_EQ(c, nullptr);
    EXPECT_EQ(std::string(simba_last_error()).find("hunter2"), std::string::npos)
        << url << " -> " << simba_last_error();
  }
}

TEST(PostgresUrl, RedactsPasswordsInUserinfoAndQuery) {
  EXPECT_EQ(simba::redact_url("postgresql://u:hunter2@h:5432/db?sslmode=require"),
            "postgresql://u:***@h:5432/db?sslmode=require");
  EXPECT_EQ(simba::redact_url("postgresql://u@h/db?sslmode=require&password=hunter2&x=1"),
            "postgresql://u@h/db?sslmode=require&password=***&x=1");
  EXPECT_EQ(simba::redact_url("postgresql://h/db?password=hunter2"),
            "postgresql://h/db?password=***");
  EXPECT_EQ(simba::redact_url("postgresql://h/db?user=a@b"), "postgresql://h/db?user=a@b");
  EXPECT_EQ(simba::redact_url("redis://:pw@h"), "redis://:***@h");
}

// The snapshot shows the URL with the password hidden (nothing listens on the
// port: only what is shown is checked).
TEST(PostgresUrl, SnapshotRedactsThePassword) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  for (const std::string& url :
       {"postgresql://u:hunter2@127.0.0.1:" + std::to_string(port) + "/db",
        "postgresql://u@127.0.0.1:" + std::to_string(port) + "/db?password=hunter2"}) {
    Client c;
    ASSERT_EQ(c.open(url, Timing{1000, 200}), SIMBA_OK) << simba_last_error();
    const std::string snap = snapshot(c);
    EXPECT_EQ(snap.find("hunter2"), std::string::npos) << snap;
    EXPECT_NE(snap.find("***"), std::string::npos) << snap;
  }
}

TEST(PostgresSchema, DdlNamesTheSchemaAndChannel) {
  const std::string ddl = simba::pg_schema_script("Tenant_1");
  EXPECT_NE(ddl.find("nspname = 'Tenant_1'"), std::string::npos);
  EXPECT_NE(ddl.find("CREATE SCHEMA \"Tenant_1\""), std::string::npos);
  EXPECT_NE(ddl.find("\"Tenant_1\".simba_lease"), std::string::npos);
  EXPECT_NE(ddl.find("pg_notify('Tenant_1_simba_released'"), std::string::npos);
  EXPECT_NE(ddl.find("pg_advisory_xact_lock(" +
                     std::to_string(simba::pg_schema_lock_key("Tenant_1")) + ")"),
            std::string::npos);
  EXPECT_EQ(ddl.find("@S@"), std::string::npos);
  EXPECT_NE(simba::pg_schema_lock_key("a"), simba::pg_schema_lock_key("b"));
}

// --- the shared server -------------------------------------------------------------

class PostgresShared : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = shared_url();
    if (url_.empty()) {
      GTEST_SKIP() << "SIMBA_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)";
    }
  }
  std::string url_;
};

// schema=NAME: the tables, functions and version row live there, created on
// first use.
TEST_F(PostgresShared, CreatesItsSchemaOnFirstUse) {
  const std::string schema = unique_schema("create");
  Election e;
  Client c;
  ASSERT_EQ(c.open(with_params(url_, "schema=" + schema), Timing{1000, 200}), SIMBA_OK)
      << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "pg.schema." + unique_id();
  ASSERT_EQ(e.start(c, name), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));

  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  const std::string q = "\"" + schema + "\"";
  EXPECT_EQ(s.q("SELECT max(version) FROM " + q + ".simba_schema_version"),
            std::to_string(simba::kPostgresSchemaVersion));
  EXPECT_EQ(
      s.q("SELECT session_id::text || ':' || token FROM " + q + ".simba_lease WHERE name = $1",
          {name}),
      session_id(c) + ":" + std::to_string(e.last_elected().token));
  EXPECT_EQ(
      s.q("SELECT count(*) FROM " + q + ".simba_session WHERE id = $1::uuid", {session_id(c)}),
      "1");
  EXPECT_EQ(s.q("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = $1 AND p.proname LIKE 'simba_%'",
                {schema}),
            "9");
  c.close();
  s.q("DROP SCHEMA " + q + " CASCADE");
}

// create=false with no schema: a clear error, never live; once a DBA applied
// the printed DDL, the client goes live without creating anything.
TEST_F(PostgresShared, CreateFalseWithoutSchemaIsAClearErrorUntilTheDdlIsApplied) {
  const std::string schema = unique_schema("nocreate");
  LoggedClient c(with_params(url_, "schema=" + schema + "&create=false"), {1000, 200});
  LogCapture& logs = c.logs;
  ASSERT_NE(c, nullptr) << simba_last_error();
  EXPECT_EQ(simba_client_wait_live(c, 700), SIMBA_ETIMEDOUT);
  EXPECT_TRUE(wait_for([&] { return logs.has("create=false"); }, 3000)) << logs.all();
  EXPECT_TRUE(logs.has(schema)) << logs.all();

  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s.q("SELECT count(*) FROM pg_namespace WHERE nspname = $1", {schema}), "0");
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  EXPECT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << logs.all();
  c.close();
  s.q("DROP SCHEMA \"" + schema + "\" CASCADE");
}

// Makes `schema` (created by the current DDL) stand in for one at `version`:
// that version row alone, and an acquire whose body differs by a marker
// comment but means the same. Returns the query that reads the acquire's
// definition back.
std::string stand_in_schema_version(PgSync& s, const std::string& schema, int version) {
  const std::string q = "\"" + schema + "\"";
  EXPECT_EQ(s.q("DELETE FROM " + q + ".simba_schema_version"), "");
  EXPECT_EQ(s.q("INSERT INTO " + q + ".simba_schema_version (version) VALUES (" +
                std::to_string(version) + ")"),
            "");
  const std::string acquire_def =
      "SELECT pg_get_functiondef('" + q + ".simba_acquire(uuid, text)'::regprocedure)";
  std::string def = s.q(acquire_def);
  const size_t begin = def.find("\nBEGIN\n");
  EXPECT_NE(begin, std::string::npos) << def;
  if (begin != std::string::npos) def.insert(begin + 7, "  -- stand-in body\n");
  EXPECT_EQ(s.q(def), "");
  EXPECT_NE(s.q(acquire_def).find("-- stand-in body"), std::string::npos);
  return acquire_def;
}

// `url` connecting as `user` (no password: the test server trusts loopback).
std::string with_user(const std::string& url, const std::string& user) {
  const size_t from = url.find("://") + 3;
  const size_t at = url.find('@', from);
  return url.substr(0, from) + user + url.substr(at == std::string::npos ? from : at);
}

// Acquires `name` with `c` and releases it; the token it had.
uint64_t lock_cycle(simba_client_t* c, const std::string& name) {
  simba_term_t* t = nullptr;
  if (simba_lock_acquire(&t, c, name.c_str(), 5000 * slow_factor()) != SIMBA_OK) {
    ADD_FAILURE() << simba_last_error();
    return 0;
  }
  const uint64_t token = simba_term_token(t);
  EXPECT_EQ(simba_lock_release(t), SIMBA_OK);
  return token;
}

// A schema one version older (a DBA applied the DDL of an earlier libsimba;
// version 1 had the same functions): with create=false the client runs on it
// as it is and says so; with create (the default) it migrates it to the
// current version and replaces the function bodies.
TEST_F(PostgresShared, AnOlderSchemaIsUsedWithCreateFalseAndMigratedWithCreate) {
  static_assert(simba::kPostgresSchemaMinVersion < simba::kPostgresSchemaVersion,
                "the test stands in an older schema");
  const std::string schema = unique_schema("older");
  const std::string q = "\"" + schema + "\"";
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  const int older = simba::kPostgresSchemaMinVersion;
  const std::string acquire_def = stand_in_schema_version(s, schema, older);

  const std::string name = "pg.older." + unique_id();
  {
    LoggedClient c(with_params(url_, "schema=" + schema + "&create=false"), {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    EXPECT_TRUE(c.logs.has("is at version " + std::to_string(older) + ", older than"))
        << c.logs.all();
    EXPECT_TRUE(c.logs.has("running on it as it is (create=false)")) << c.logs.all();
    EXPECT_EQ(lock_cycle(c, name), 1u);
  }
  EXPECT_EQ(s.q("SELECT max(version) FROM " + q + ".simba_schema_version"), std::to_string(older));
  EXPECT_NE(s.q(acquire_def).find("-- stand-in body"), std::string::npos);

  {
    LoggedClient c(with_params(url_, "schema=" + schema), {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    EXPECT_TRUE(c.logs.has("from version " + std::to_string(older))) << c.logs.all();
    EXPECT_EQ(lock_cycle(c, name), 2u);
  }
  EXPECT_EQ(s.q("SELECT max(version) FROM " + q + ".simba_schema_version"),
            std::to_string(simba::kPostgresSchemaVersion));
  EXPECT_EQ(s.q(acquire_def).find("-- stand-in body"), std::string::npos);
  s.q("DROP SCHEMA " + q + " CASCADE");
}

// A login role of the test's own for the schema `q` (quoted). The schema and
// the role go whatever the test's outcome: a role is the cluster's, not the
// schema's, and would outlive a failed run.
struct ScratchRole {
  ScratchRole(PgSync& sync, std::string schema_q, const std::string& prefix)
      : s(sync), q(std::move(schema_q)), name(prefix + unique_id()) {
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    name = name.substr(0, 48);
  }
  ~ScratchRole() {
    s.q("DROP SCHEMA IF EXISTS " + q + " CASCADE");
    s.q("DROP ROLE IF EXISTS " + name);
  }
  // Makes it, with the grants `simba schema` listed before version 3 (no
  // permit table).
  std::string create_with_older_grants() const {
    return "CREATE ROLE " + name + " LOGIN;\nGRANT USAGE ON SCHEMA " + q + " TO " + name +
           ";\nGRANT SELECT, INSERT, UPDATE, DELETE ON " + q + ".simba_session, " + q +
           ".simba_lease TO " + name + ";\nGRANT SELECT ON " + q + ".simba_schema_version TO " +
           name + ";\n";
  }
  PgSync& s;
  const std::string q;
  std::string name;
};

// The DBA applied an older version's DDL and the clients' role has only the
// grants `simba schema` lists: a client left at create=true (the default)
// cannot migrate (it owns nothing), says why, and runs on the schema as it is.
TEST_F(PostgresShared, AnOlderSchemaTheRoleCannotMigrateIsUsedAsItIs) {
  const std::string schema = unique_schema("notowner");
  const std::string q = "\"" + schema + "\"";
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  const ScratchRole role(s, q, "simba_client_");
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  const std::string acquire_def =
      stand_in_schema_version(s, schema, simba::kPostgresSchemaMinVersion);
  ASSERT_EQ(s.script(role.create_with_older_grants()), "");
  {
    LoggedClient c(with_params(with_user(url_, role.name), "schema=" + schema), {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    EXPECT_TRUE(c.logs.has("migrating the schema")) << c.logs.all();
    EXPECT_TRUE(c.logs.has("cannot migrate it: ")) << c.logs.all();
    EXPECT_TRUE(c.logs.has("running on it as it is")) << c.logs.all();
    EXPECT_EQ(lock_cycle(c, "pg.notowner." + unique_id()), 1u);
    // Its close too, without grants on the permit table of version 3.
    c.close();
    EXPECT_FALSE(c.logs.has("permission denied for table")) << c.logs.all();
  }
  EXPECT_EQ(s.q("SELECT max(version) FROM " + q + ".simba_schema_version"),
            std::to_string(simba::kPostgresSchemaMinVersion));
  EXPECT_NE(s.q(acquire_def).find("-- stand-in body"), std::string::npos);
}

// Calls `start(cb)` on `b` and runs its loop until the reply came.
template <typename Reply, typename Start>
Reply call_on(BackendOnLoop& b, Start start) {
  Reply out;
  bool got = false;
  start([&](const Reply& r) {
    out = r;
    got = true;
  });
  EXPECT_TRUE(b.run_until([&] { return got; }, 5000 * slow_factor()));
  return out;
}

// A DBA migrated to version 3 but granted the clients' role only the tables
// of the versions before: its clients run leases as before (keep-alive,
// close), and a permit call fails with the server's reason.
TEST_F(PostgresShared, WithoutGrantsOnThePermitTableLeasesRunAsBefore) {
  const std::string schema = unique_schema("nopermitgrant");
  const std::string q = "\"" + schema + "\"";
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  const ScratchRole role(s, q, "simba_nopg_");
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  ASSERT_EQ(s.script(role.create_with_older_grants()), "");
  BackendOnLoop b(with_params(with_user(url_, role.name), "schema=" + schema + "&create=false"));
  ASSERT_TRUE(b) << b.error();
  const simba::OpenReply o = call_on<simba::OpenReply>(
      b, [&](auto cb) { return b->open_session(simba::ms(5000), simba::ms(2000), cb); });
  ASSERT_EQ(o.outcome, simba::Outcome::kOk) << o.error;
  const std::string name = "pg.nopermitgrant." + unique_id();
  const simba::AcquireReply lease = call_on<simba::AcquireReply>(
      b, [&](auto cb) { return b->acquire(o.session_id, name, simba::ms(2000), cb); });
  ASSERT_EQ(lease.outcome, simba::Outcome::kOk) << lease.error;
  const simba::KeepAliveReply ka = call_on<simba::KeepAliveReply>(b, [&](auto cb) {
    return b->keep_alive(o.session_id, simba::ms(5000), simba::ms(2000), cb);
  });
  EXPECT_EQ(ka.outcome, simba::Outcome::kOk) << ka.error;
  EXPECT_EQ(ka.owned, (std::vector<simba::OwnedLease>{{name, lease.token}}));
  simba::PermitAsk read;
  read.kind = simba::PermitKind::kRead;
  const simba::AcquireReply denied = call_on<simba::AcquireReply>(
      b, [&](auto cb) { return b->acquire_permit(o.session_id, name, read, simba::ms(2000), cb); });
  EXPECT_EQ(denied.outcome, simba::Outcome::kError);
  EXPECT_NE(denied.error.find("permission denied"), std::string::npos) << denied.error;
  EXPECT_EQ(call_on<simba::DoneReply>(
                b, [&](auto cb) { return b->close_session(o.session_id, simba::ms(2000), cb); })
                .outcome,
            simba::Outcome::kOk);
  EXPECT_EQ(s.q("SELECT count(*) FROM " + q + ".simba_session"), "0");
}

// A schema already at a newer version than this libsimba's: the DDL (a
// client's, or the script a DBA applies) stops before changing anything, so a
// client that read the version before a newer libsimba migrated never puts
// older function bodies back; a client runs on the newer schema as it is.
TEST_F(PostgresShared, TheDdlNeverOverwritesANewerSchema) {
  const std::string schema = unique_schema("newer");
  const std::string q = "\"" + schema + "\"";
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  const int newer = simba::kPostgresSchemaVersion + 1;
  const std::string acquire_def = stand_in_schema_version(s, schema, newer);
  EXPECT_NE(s.script(simba::pg_schema_script(schema)).find("left unchanged"), std::string::npos);
  s.q("ROLLBACK");  // the script's BEGIN stopped at the error
  EXPECT_NE(s.q(acquire_def).find("-- stand-in body"), std::string::npos);
  {
    LoggedClient c(with_params(url_, "schema=" + schema), {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    EXPECT_TRUE(c.logs.has("newer than this libsimba's")) << c.logs.all();
    EXPECT_EQ(lock_cycle(c, "pg.newer." + unique_id()), 1u);
  }
  EXPECT_EQ(s.q("SELECT max(version) FROM " + q + ".simba_schema_version"), std::to_string(newer));
  EXPECT_NE(s.q(acquire_def).find("-- stand-in body"), std::string::npos);
  s.q("DROP SCHEMA " + q + " CASCADE");
}

// Each connection prepares the calls' statements once, before its first call:
// a schema that has its version but not every function (a DBA's half-applied
// DDL) is a clear error naming what is missing, never live; once the DDL is
// applied again the next connection prepares them and the client goes live.
TEST_F(PostgresShared, StatementsThatCannotBePreparedAreAClearErrorUntilRepaired) {
  const std::string schema = unique_schema("noprep");
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  s.q("DROP FUNCTION \"" + schema + "\".simba_acquire(uuid, text)");
  LoggedClient c(with_params(url_, "schema=" + schema + "&create=false"), {1000, 200});
  LogCapture& logs = c.logs;
  ASSERT_NE(c, nullptr) << simba_last_error();
  EXPECT_EQ(simba_client_wait_live(c, 700), SIMBA_ETIMEDOUT);
  EXPECT_TRUE(wait_for([&] { return logs.has("cannot prepare the statements"); }, 3000))
      << logs.all();
  EXPECT_TRUE(logs.has("simba_acquire")) << logs.all();
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  EXPECT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << logs.all();
  simba_term_t* t = nullptr;
  ASSERT_EQ(simba_lock_acquire(&t, c, ("pg.noprep." + unique_id()).c_str(), 5000), SIMBA_OK)
      << simba_last_error();
  EXPECT_EQ(simba_lock_release(t), SIMBA_OK);
  c.close();
  s.q("DROP SCHEMA \"" + schema + "\" CASCADE");
}

// Prepared statements live and die with their connection: after the server
// ends the client's connections, the new ones prepare them again and every
// call works as before.
TEST_F(PostgresShared, ANewConnectionPreparesTheStatementsAgain) {
  const std::string client_name = "prep-" + unique_id();
  Timing timing{4000, 400};
  timing.settings = {{"client.name", client_name}};
  LoggedClient c(url_, timing);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "pg.reprepare." + unique_id();
  simba_term_t* t = nullptr;
  ASSERT_EQ(simba_lock_acquire(&t, c, name.c_str(), 5000), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_lock_release(t), SIMBA_OK);

  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s.q("SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity "
                "WHERE application_name = $1",
                {"simba/" + client_name}),
            "t");
  // Within the lease: the session survives, the calls go out on a new
  // connection, each only executing what that connection prepared.
  int err = SIMBA_EBACKEND;
  const int64_t until = mono_ns() + 10'000 * slow_factor() * kMsNs;
  while (mono_ns() < until) {
    err = simba_lock_acquire(&t, c, name.c_str(), 1000);
    if (err == SIMBA_OK) break;
    sleep_ms(50);
  }
  ASSERT_EQ(err, SIMBA_OK) << simba_last_error() << c.logs.all();
  EXPECT_TRUE(simba_term_is_valid(t));
  EXPECT_EQ(simba_lock_release(t), SIMBA_OK);
  EXPECT_TRUE(c.logs.has("connected")) << c.logs.all();
  EXPECT_EQ(counter(c, "sessions_opened"), 1) << c.logs.all();
}

// A schema of version 2 (before permits, ADR 0046): a client runs on it as it
// is, its permit calls failing with the version they need; a client with
// create migrates it to the current version, where permits work, beside the
// client still running on the statements it prepared before.
TEST_F(PostgresShared, AVersion2SchemaRunsWithoutPermitsAndIsMigratedToThem) {
  static_assert(simba::kPostgresSchemaPermitsVersion == 3, "the test makes a version 2 schema");
  const std::string schema = unique_schema("v2");
  const std::string q = "\"" + schema + "\"";
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s.script(simba::pg_schema_script(schema)), "");
  // What version 3 added goes, and version 2's simba_close comes back.
  ASSERT_EQ(s.script("DROP FUNCTION " + q + ".simba_keep_alive_all(uuid, bigint), " + q +
                     ".simba_acquire_permit(uuid, text, smallint, bigint, bigint, boolean), " + q +
                     ".simba_release_permit(uuid, text, smallint, bigint, bigint);\n"
                     "DROP TABLE " +
                     q +
                     ".simba_permit;\n"
                     "ALTER TABLE " +
                     q +
                     ".simba_session DROP COLUMN permit_resources;\n"
                     "CREATE OR REPLACE FUNCTION " +
                     q +
                     ".simba_close(p_session uuid) RETURNS integer LANGUAGE plpgsql AS $$\n"
                     "DECLARE v_name text; v_freed integer := 0;\n"
                     "BEGIN\n"
                     "  DELETE FROM " +
                     q +
                     ".simba_session s WHERE s.id = p_session;\n"
                     "  FOR v_name IN UPDATE " +
                     q +
                     ".simba_lease l SET session_id = NULL WHERE l.session_id = p_session "
                     "RETURNING l.name LOOP\n"
                     "    v_freed := v_freed + 1;\n"
                     "  END LOOP;\n"
                     "  RETURN v_freed;\n"
                     "END $$;\n"
                     "UPDATE " +
                     q + ".simba_schema_version SET version = 2;\n"),
            "");
  const std::string name = "pg.v2." + unique_id();
  BackendOnLoop old(with_params(url_, "schema=" + schema + "&create=false"));
  ASSERT_TRUE(old) << old.error();
  const simba::OpenReply o1 = call_on<simba::OpenReply>(
      old, [&](auto cb) { return old->open_session(simba::ms(5000), simba::ms(2000), cb); });
  ASSERT_EQ(o1.outcome, simba::Outcome::kOk) << o1.error;
  EXPECT_TRUE(old.logged("semaphores and read/write locks need version 3"));
  const simba::AcquireReply lease = call_on<simba::AcquireReply>(
      old, [&](auto cb) { return old->acquire(o1.session_id, name, simba::ms(2000), cb); });
  EXPECT_EQ(lease.outcome, simba::Outcome::kOk) << lease.error;
  simba::PermitAsk sem;
  sem.kind = simba::PermitKind::kSemaphore;
  sem.size = 2;
  const simba::AcquireReply refused = call_on<simba::AcquireReply>(old, [&](auto cb) {
    return old->acquire_permit(o1.session_id, name, sem, simba::ms(2000), cb);
  });
  EXPECT_EQ(refused.outcome, simba::Outcome::kError);
  EXPECT_NE(refused.error.find("need version 3"), std::string::npos) << refused.error;
  EXPECT_EQ(call_on<simba::KeepAliveReply>(old,
                                           [&](auto cb) {
                                             return old->keep_alive(o1.session_id, simba::ms(5000),
                                                                    simba::ms(2000), cb);
                                           })
                .owned.size(),
            1u);

  BackendOnLoop now(with_params(url_, "schema=" + schema));
  ASSERT_TRUE(now) << now.error();
  const simba::OpenReply o2 = call_on<simba::OpenReply>(
      now, [&](auto cb) { return now->open_session(simba::ms(5000), simba::ms(2000), cb); });
  ASSERT_EQ(o2.outcome, simba::Outcome::kOk) << o2.error;
  EXPECT_TRUE(now.logged("from version 2"));
  EXPECT_EQ(s.q("SELECT max(version) FROM " + q + ".simba_schema_version"),
            std::to_string(simba::kPostgresSchemaVersion));
  const simba::AcquireReply permit = call_on<simba::AcquireReply>(now, [&](auto cb) {
    return now->acquire_permit(o2.session_id, name, sem, simba::ms(2000), cb);
  });
  ASSERT_EQ(permit.outcome, simba::Outcome::kOk) << permit.error;
  const simba::KeepAliveReply listed = call_on<simba::KeepAliveReply>(now, [&](auto cb) {
    return now->keep_alive(o2.session_id, simba::ms(5000), simba::ms(2000), cb);
  });
  ASSERT_EQ(listed.outcome, simba::Outcome::kOk) << listed.error;
  EXPECT_EQ(listed.owned,
            (std::vector<simba::OwnedLease>{{name, permit.token, sem.kind, permit.permit}}));
  // The old client's statements still work on the migrated schema.
  const simba::KeepAliveReply old_ka = call_on<simba::KeepAliveReply>(old, [&](auto cb) {
    return old->keep_alive(o1.session_id, simba::ms(5000), simba::ms(2000), cb);
  });
  EXPECT_EQ(old_ka.outcome, simba::Outcome::kOk) << old_ka.error;
  EXPECT_EQ(old_ka.owned, (std::vector<simba::OwnedLease>{{name, lease.token}}));
  EXPECT_EQ(
      call_on<simba::DoneReply>(
          old, [&](auto cb) { return old->close_session(o1.session_id, simba::ms(2000), cb); })
          .outcome,
      simba::Outcome::kOk);
  EXPECT_EQ(
      call_on<simba::DoneReply>(
          now, [&](auto cb) { return now->close_session(o2.session_id, simba::ms(2000), cb); })
          .outcome,
      simba::Outcome::kOk);
  EXPECT_EQ(s.q("SELECT sum(cardinality(e_permit)) FROM " + q + ".simba_permit"), "0");
  s.q("DROP SCHEMA " + q + " CASCADE");
}

// Clients starting together on a missing schema: every one goes live, the
// schema is made once (one version row), nobody fails on a concurrent CREATE.
TEST_F(PostgresShared, ClientsRacingToCreateTheSchemaAllSucceed) {
  const std::string schema = unique_schema("race");
  const std::string url = with_params(url_, "schema=" + schema);
  constexpr int kClients = 6;
  std::vector<simba_client_t*> clients(kClients, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      simba_config_t* cfg = nullptr;
      simba_config_new(&cfg);
      simba_config_set_ms(cfg, "session.lease-duration", 2000);
      simba_config_set_ms(cfg, "session.renew-interval", 500);
      if (simba_client_open(&clients[i], url.c_str(), cfg) == SIMBA_OK) opened++;
      simba_config_free(cfg);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(opened.load(), kClients);
  for (auto* c : clients) {
    EXPECT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << snapshot(c);
  }
  // Nobody needed a second try: each opened exactly one session.
  for (auto* c : clients) EXPECT_EQ(counter(c, "sessions_opened"), 1) << snapshot(c);
  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s.q("SELECT count(*) FROM \"" + schema + "\".simba_schema_version"), "1");
  EXPECT_EQ(s.q("SELECT count(*) FROM \"" + schema + "\".simba_session"), std::to_string(kClients));
  for (auto* c : clients) simba_client_close(c);
  s.q("DROP SCHEMA \"" + schema + "\" CASCADE");
}

// The session row disappears behind the client's back: the next keep-alive
// answers Expired and the term ends with SESSION_EXPIRED; a new session
// follows and wins again with a larger token.
TEST_F(PostgresShared, DeletedSessionEndsTheTermWithSessionExpired) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "pg.del." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const std::string sid = session_id(c);

  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s.q("WITH d AS (DELETE FROM public.simba_session WHERE id = $1::uuid RETURNING 1) "
                "SELECT count(*) FROM d",
                {sid}),
            "1");
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_SESSION_EXPIRED);
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
  EXPECT_NE(session_id(c), sid);
  EXPECT_GT(e.last_elected().token, e.elected()[0].token);
}

// The lease row is made to name another live session: the next keep-alive no
// longer lists it and the term ends with TAKEN_OVER; no new term while the
// intruder's session lives.
TEST_F(PostgresShared, RewrittenHolderEndsTheTermWithTakenOver) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "pg.takeover." + unique_id();
  ASSERT_EQ(e.start(c, name), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));

  PgSync s(url_);
  ASSERT_TRUE(s.ok()) << s.error();
  const std::string intruder = s.q("SELECT gen_random_uuid()::text");
  ASSERT_EQ(s.q("SELECT public.simba_open($1::uuid, 60000, 'intruder')", {intruder}), "60000");
  ASSERT_EQ(
      s.q("UPDATE public.simba_lease SET session_id = $1::uuid WHERE name = $2", {intruder, name}),
      "");
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_TAKEN_OVER);
  EXPECT_FALSE(simba_term_is_valid(e.last_elected().term));
  sleep_ms(300);  // several attempts, all answered Held (not an assertion of timing)
  EXPECT_EQ(e.elected_count(), 1);
  // The intruder closes: its lease is freed (and broadcast), the election wins.
  ASSERT_EQ(s.q("SELECT public.simba_close($1::uuid)", {intruder}), "1");
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
  EXPECT_GT(e.last_elected().token, e.elected()[0].token);
}

// A keep-alive hangs on a row lock held by another transaction: the call is cut
// at its timeout (the renew period) on the client, the server cancels the
// statement itself (statement_timeout), the term ends with DEADLINE_PASSED
// while the lock is held, and a new session wins once it is gone.
TEST_F(PostgresShared, HungStatementIsCutAtTheCallTimeout) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "pg.hung." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const std::string sid = session_id(c);

  PgSync locker(url_), watcher(url_);
  ASSERT_TRUE(locker.ok() && watcher.ok()) << locker.error();
  ASSERT_EQ(locker.q("BEGIN"), "");
  const int64_t locked_at = mono_ns();
  ASSERT_EQ(
      locker.q("SELECT id::text FROM public.simba_session WHERE id = $1::uuid FOR UPDATE", {sid}),
      sid);
  // A keep-alive now waits for the lock...
  const std::string waiting =
      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
      "'%simba_keep_alive%'";
  ASSERT_TRUE(wait_for([&] { return watcher.q(waiting) != "0"; }, 2000 * slow_factor()));
  // ...and is cut: the client gives up after the renew period and the server
  // cancels the statement; no keep-alive stays queued behind the lock.
  EXPECT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       1000 * slow_factor()));
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  const int64_t revoked_ms = (e.last_revoked().at_ns - locked_at) / kMsNs;
  EXPECT_LE(revoked_ms, 1000 + 300 * slow_factor()) << "revoked " << revoked_ms << " ms after";
  // Keep-alives kept being tried (each cut after 200 ms) rather than one
  // waiting for good.
  EXPECT_GE(counter(c, "keep_alives"), 3);
  sleep_ms(200);
  EXPECT_EQ(watcher.q("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                      "query LIKE '%simba_keep_alive%' AND now() - query_start > "
                      "interval '400 milliseconds'"),
            "0")
      << "a keep-alive kept waiting past its statement_timeout";
  ASSERT_EQ(locker.q("ROLLBACK"), "");
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor())) << snapshot(c);
  EXPECT_NE(session_id(c), sid);
  EXPECT_GT(e.last_elected().token, e.elected()[0].token);
}

// ADR 0039, the backend alone, as the core drives it: a statement that hangs
// on a row lock is ended by what the transport says, never by a timer of the
// backend's own. With a short budget the server cancels it (statement_timeout,
// SQLSTATE 57014); with a long one, the caller abandons it once it waited
// long enough: its connection is dropped (it ends with kError), and once the
// lock is gone the next call, on a new connection, succeeds.
TEST_F(PostgresShared, AHungStatementEndsByTheServerOrByAbandon) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  std::string sid;
  int opened = 0;
  b->open_session(simba::ms(10000), simba::ms(2000), [&](const simba::OpenReply& r) {
    ++opened;
    if (r.outcome == simba::Outcome::kOk) sid = r.session_id;
  });
  ASSERT_TRUE(b.run_until([&] { return opened > 0; }, 5000 * slow_factor()));
  ASSERT_FALSE(sid.empty());
  PgSync locker(url_);
  ASSERT_TRUE(locker.ok()) << locker.error();
  ASSERT_EQ(locker.q("BEGIN"), "");
  ASSERT_EQ(
      locker.q("SELECT id::text FROM public.simba_session WHERE id = $1::uuid FOR UPDATE", {sid}),
      sid);

  int answers = 0;
  simba::KeepAliveReply got;
  auto keep_alive = [&](int64_t budget_ms) {
    return b->keep_alive(sid, simba::ms(10000), simba::ms(budget_ms),
                         [&](const simba::KeepAliveReply& r) {
                           ++answers;
                           got = r;
                         });
  };
  keep_alive(300);
  ASSERT_TRUE(b.run_until([&] { return answers > 0; }, 3000 * slow_factor()));
  EXPECT_EQ(got.outcome, simba::Outcome::kError);
  EXPECT_NE(got.error.find("57014"), std::string::npos) << got.error;

  answers = 0;
  const simba::Backend::CallRef call = keep_alive(10000);
  b.run_for(400);
  EXPECT_EQ(answers, 0) << got.error;
  b->abandon(call);
  EXPECT_EQ(answers, 0) << "ended inside abandon()";
  ASSERT_TRUE(b.run_until([&] { return answers > 0; }, 2000 * slow_factor()));
  EXPECT_EQ(got.outcome, simba::Outcome::kError) << got.error;
  EXPECT_TRUE(b.logged("no answer within the call's timeout"))
      << "the connection was not dropped as stuck";
  ASSERT_EQ(locker.q("ROLLBACK"), "");

  // The first calls may be refused during the reconnect's backoff.
  got = simba::KeepAliveReply{};
  const int64_t until = mono_ns() + 5000 * slow_factor() * kMsNs;
  while (got.outcome != simba::Outcome::kOk && mono_ns() < until) {
    answers = 0;
    keep_alive(2000);
    ASSERT_TRUE(b.run_until([&] { return answers > 0; }, 5000 * slow_factor()));
    if (got.outcome != simba::Outcome::kOk) b.run_for(50);
  }
  EXPECT_EQ(got.outcome, simba::Outcome::kOk) << got.error;
}

// libuv runs timers before it reads sockets, so after a long loop turn a
// call's timer fires while its answer already waits in the socket. That is a
// slow loop, not a stuck connection: the answer is read and used, and the
// connection stays (resetting it cost every call on it, which under load
// became a storm of timeouts, resets and orphaned leases). An EXTERNAL-mode
// host that does not run the loop for longer than the call timeout makes the
// long turn.
TEST_F(PostgresShared, AnAnswerWaitingInTheSocketIsNotTakenForATimeout) {
  Timing t{4000, 400};  // calls time out after 400 ms
  t.settings = {{"loop.mode", "external"}};
  LoggedClient c(url_, t);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  struct Result {
    int err = -1;
    simba_term_t* term = nullptr;
  } got;
  const int64_t acquires = counter(c, "acquires");
  // The acquire goes on the wire inside this call (EXTERNAL mode, host thread).
  ASSERT_EQ(simba_lock_acquire_async(
                c, ("pg.late-turn." + unique_id()).c_str(), 5000,
                [](void* ud, int err, simba_term_t* term) {
                  auto* r = static_cast<Result*>(ud);
                  r->err = err;
                  r->term = term;
                },
                &got),
            SIMBA_OK)
      << simba_last_error();
  sleep_ms(700);  // the host is busy: the answer arrives, its timer expires
  const int64_t until = mono_ns() + 3000 * slow_factor() * kMsNs;
  while (got.err < 0 && mono_ns() < until) {
    ASSERT_EQ(simba_client_process(c), SIMBA_OK) << simba_last_error();
    sleep_ms(1);
  }
  ASSERT_EQ(got.err, SIMBA_OK);
  // The core's own call timeout expired too and it may have tried again (its
  // late answer is released as an orphan): that is the core's rule. The
  // backend's is that the connection was not taken for stuck.
  EXPECT_GE(counter(c, "acquires"), acquires + 1);
  EXPECT_FALSE(c.logs.has("no answer within the call's timeout")) << c.logs.all();
  EXPECT_FALSE(c.logs.has("connection reset")) << c.logs.all();
  EXPECT_TRUE(simba_term_is_valid(got.term));
  EXPECT_EQ(simba_lock_release(got.term), SIMBA_OK);  // runs the loop here until answered
}

// Racers for the race tests: sessions of their own (simba_open, in the
// default schema, which a client made), each on a connection of its own under
// READ COMMITTED (the default), that run one statement per round, all let go
// at once.
class RaceRig {
 public:
  RaceRig(const std::string& url, int racers) : admin(url) {
    if (!admin.ok()) return;
    {
      Client c;  // the schema exists once a client went live
      if (c.open(url, Timing{1000, 200}) != SIMBA_OK ||
          simba_client_wait_live(c, 5000 * slow_factor()) != SIMBA_OK) {
        return;
      }
    }
    for (int i = 0; i < racers; ++i) {
      conns.push_back(std::make_unique<PgSync>(url));
      if (!conns.back()->ok() ||
          conns.back()->q("SHOW transaction_isolation") != "read committed") {
        return;
      }
      sessions.push_back(new_session());
    }
    ok = true;
  }
  std::string new_session() {
    const std::string sid = admin.q("SELECT gen_random_uuid()::text");
    EXPECT_EQ(admin.q("SELECT public.simba_open($1::uuid, 600000, 'racer')", {sid}), "600000");
    return sid;
  }
  // Ends racer i's session (as if it expired) and gives it a new one.
  void expire(int i) {
    admin.q(
        "UPDATE public.simba_session SET expires_at = clock_timestamp() - interval '1 second' "
        "WHERE id = $1::uuid",
        {sessions[i]});
    sessions[i] = new_session();
  }
  // Every racer runs `sql` with `params(i)` at once; their first rows ("a|b"),
  // "error" for none.
  std::vector<std::string> round(const std::string& sql,
                                 const std::function<std::vector<std::string>(int)>& params) {
    const int n = static_cast<int>(conns.size());
    std::vector<std::string> answers(n);
    std::mutex mu;
    std::condition_variable cv;
    int ready = 0;
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        const std::vector<std::string> p = params(i);
        {
          std::unique_lock<std::mutex> lock(mu);
          ++ready;
          cv.notify_all();
          cv.wait(lock, [&] { return ready == n; });
        }
        const std::vector<std::string> row = conns[i]->rows(sql, p);
        answers[i] = row.empty() ? "error" : row[0];
      });
    }
    for (auto& t : threads) t.join();
    return answers;
  }
  ~RaceRig() {
    for (const auto& sid : sessions) admin.q("SELECT public.simba_close($1::uuid)", {sid});
  }

  PgSync admin;
  std::vector<std::unique_ptr<PgSync>> conns;
  std::vector<std::string> sessions;
  bool ok = false;
};

// N sessions race for one name, under READ COMMITTED (the default), through
// the acquire function itself: in every round exactly one wins, and no token
// is ever handed out twice. Half the rounds free the lease by release, half by
// letting the holder's session expire, so both the free and the take-over
// paths race.
TEST_F(PostgresShared, RacingAcquiresNeverBothWinNorRepeatAToken) {
  constexpr int kRacers = 8;
  const int rounds = 40 / static_cast<int>(slow_factor());
  const std::string name = "pg.race." + unique_id();
  RaceRig rig(url_, kRacers);
  ASSERT_TRUE(rig.ok) << rig.admin.error();
  std::set<long long> tokens;
  long long last = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<std::string> answers =
        rig.round("SELECT code, value FROM public.simba_acquire($1::uuid, $2)", [&](int i) {
          return std::vector<std::string>{rig.sessions[i], name};
        });
    int winner = -1, winners = 0;
    for (int i = 0; i < kRacers; ++i) {
      if (answers[i].compare(0, 2, "1|") == 0) {
        ++winners;
        winner = i;
        const long long token = std::atoll(answers[i].c_str() + 2);
        EXPECT_TRUE(tokens.insert(token).second) << "token " << token << " handed out twice";
        EXPECT_GT(token, last);
        last = token;
      } else {
        ASSERT_EQ(answers[i].compare(0, 2, "0|"), 0) << "racer " << i << " answered " << answers[i];
      }
    }
    ASSERT_EQ(winners, 1) << "round " << r;
    if (r % 2 == 0) {
      EXPECT_EQ(rig.admin.q("SELECT public.simba_release($1::uuid, $2, $3)",
                            {rig.sessions[winner], name, std::to_string(last)}),
                "1");
    } else {
      rig.expire(winner);  // the holder's session expires; a new session replaces it
    }
  }
  EXPECT_EQ(static_cast<int>(tokens.size()), rounds);
}

// Racing permit acquires on their own connections (ADR 0046), round after
// round: a semaphore of size 3 grants exactly 3, a write exactly 1, never a
// permit id twice and always above the ones before. The winners then release,
// or (every other round) their sessions expire, so the next round also sweeps
// the entries of ended sessions.
TEST_F(PostgresShared, RacingPermitAcquiresNeverExceedTheSizeNorRepeatAnId) {
  constexpr int kRacers = 8, kSize = 3;
  const int rounds = 30 / static_cast<int>(slow_factor());
  const std::string name = "pg.permit.race." + unique_id();
  RaceRig rig(url_, kRacers);
  ASSERT_TRUE(rig.ok) << rig.admin.error();
  std::map<std::string, long long> last;  // per kind
  std::set<std::pair<std::string, long long>> ids;
  for (int r = 0; r < 2 * rounds; ++r) {
    const std::string kind = r % 2 == 0 ? "1" : "3";  // a semaphore round, then a write round
    const std::vector<std::string> answers = rig.round(
        "SELECT code, token, permit FROM public.simba_acquire_permit($1::uuid, $2, $3::smallint, "
        "3, 0, false)",
        [&](int i) {
          return std::vector<std::string>{rig.sessions[i], name, kind};
        });
    std::vector<std::pair<int, std::string>> winners;  // racer, "permit|token"
    const long long before = last[kind];               // the rounds before's highest
    for (int i = 0; i < kRacers; ++i) {
      if (answers[i].compare(0, 2, "1|") == 0) {
        long long token = 0, permit = 0;
        ASSERT_EQ(std::sscanf(answers[i].c_str(), "1|%lld|%lld", &token, &permit), 2);
        EXPECT_EQ(token, permit);
        EXPECT_TRUE(ids.insert({kind, permit}).second) << "permit " << permit << " twice";
        EXPECT_GT(permit, before);
        last[kind] = std::max(last[kind], permit);
        winners.emplace_back(i, std::to_string(permit) + "|" + std::to_string(token));
      } else {
        ASSERT_EQ(answers[i].compare(0, 2, "0|"), 0) << "racer " << i << " answered " << answers[i];
      }
    }
    ASSERT_EQ(winners.size(), kind == "1" ? size_t{kSize} : size_t{1}) << "round " << r;
    for (const auto& [i, entry] : winners) {
      if (r % 4 < 2) {
        const size_t bar = entry.find('|');
        EXPECT_EQ(
            rig.admin.q("SELECT public.simba_release_permit($1::uuid, $2, $3::smallint, $4, $5)",
                        {rig.sessions[i], name, kind, entry.substr(0, bar), entry.substr(bar + 1)}),
            "1");
      } else {
        rig.expire(i);
      }
    }
  }
  EXPECT_EQ(static_cast<int>(ids.size()), rounds * (kSize + 1));
}

// A permit granted while the session's keep-alive runs is still listed by the
// next keep-alive. The acquire reads the session's permit_resources (the
// resource listed from an earlier, released permit) before the keep-alive drops
// the resource from it, and grants after: without the resource in the list, no
// keep-alive lists the entry, so the core ends the term TAKEN_OVER and never
// releases the entry as an orphan; it then counts against the size until the
// session ends. The row lock of a third transaction holds the acquire between
// its read and its grant, as any concurrent acquire or release of the resource
// may.
TEST_F(PostgresShared, APermitGrantedDuringAKeepAliveIsListedByTheNext) {
  const std::string name = "pg.permit.ka." + unique_id();
  RaceRig rig(url_, 0);
  ASSERT_TRUE(rig.ok) << rig.admin.error();
  const std::string sid = rig.new_session();
  rig.sessions.push_back(sid);
  const std::string acquire =
      "SELECT code, token, permit FROM public.simba_acquire_permit($1::uuid, $2, 1::smallint, 1, "
      "0, false)";
  ASSERT_EQ(rig.admin.rows(acquire, {sid, name}), std::vector<std::string>{"1|1|1"});
  ASSERT_EQ(rig.admin.q("SELECT public.simba_release_permit($1::uuid, $2, 1::smallint, 1, 1)",
                        {sid, name}),
            "1");
  PgSync locker(url_), acquirer(url_);
  ASSERT_TRUE(locker.ok() && acquirer.ok());
  ASSERT_EQ(locker.script("BEGIN"), "");
  ASSERT_EQ(
      locker.q("SELECT 1 FROM public.simba_permit WHERE resource = $1 FOR UPDATE", {"sem/" + name}),
      "1");
  const std::string pid = acquirer.q("SELECT pg_backend_pid()");
  std::vector<std::string> granted;
  std::thread t([&] { granted = acquirer.rows(acquire, {sid, name}); });
  // The acquire read the row and the session, and waits for the row's lock.
  bool waiting = false;
  for (int i = 0; i < 500 && !waiting; ++i) {
    waiting = rig.admin.q("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1::int",
                          {pid}) == "Lock";
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(waiting);
  rig.admin.rows("SELECT * FROM public.simba_keep_alive_all($1::uuid, 600000)", {sid});
  EXPECT_EQ(locker.script("COMMIT"), "");
  t.join();
  ASSERT_EQ(granted, std::vector<std::string>{"1|2|2"});
  // The next keep-alive lists the permit (kind 1, permit 2, token 2).
  bool listed = false;
  for (const std::string& row :
       rig.admin.rows("SELECT lease_name, lease_token, entry_kind, entry_permit "
                      "FROM public.simba_keep_alive_all($1::uuid, 600000)",
                      {sid})) {
    listed = listed || row == name + "|2|1|2";
  }
  EXPECT_TRUE(listed) << "permit 2 of semaphore " << name << " held but never listed";
}

// TLS with the certificate the test script made: verify-full against
// 127.0.0.1 (the certificate names it) goes live over TLS; a wrong root
// certificate never does.
TEST_F(PostgresShared, TlsWithTheTestCertificate) {
  const char* ca = std::getenv("SIMBA_TEST_POSTGRES_CA");
  if (!ca || !*ca) GTEST_SKIP() << "SIMBA_TEST_POSTGRES_CA is not set (scripts/test.sh sets it)";
  std::string base = url_.substr(0, url_.find('?'));
  const std::string tag = "tls" + std::to_string(getpid());
  {
    Election e;
    Client c;
    const std::string url = base + "?sslmode=verify-full&sslrootcert=" + ca;
    ASSERT_EQ(c.open(url, Timing{1000, 200}, tag.c_str()), SIMBA_OK) << simba_last_error();
    simba_client_t* raw = c;
    ASSERT_EQ(simba_client_wait_live(raw, 5000 * slow_factor()), SIMBA_OK) << snapshot(raw);
    ASSERT_EQ(e.start(raw, "pg.tls." + unique_id()), SIMBA_OK);
    ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
    PgSync s(url_);
    ASSERT_TRUE(s.ok()) << s.error();
    // Both connections (command and listener) use TLS.
    EXPECT_TRUE(wait_for(
        [&] {
          return s.q("SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE "
                     "ssl AND application_name = $1",
                     {"simba/" + tag}) == "2";
        },
        3000))
        << s.q("SELECT string_agg(application_name, ',') FROM pg_stat_activity");
    ASSERT_EQ(e.stop(5000 * slow_factor()), SIMBA_OK);
  }
  {
    // A root certificate that did not sign the server's: never live.
    const std::string wrong = "/etc/ssl/certs/ca-certificates.crt";
    LoggedClient c(base + "?sslmode=verify-full&sslrootcert=" + wrong, {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    EXPECT_EQ(simba_client_wait_live(c, 700), SIMBA_ETIMEDOUT);
    EXPECT_TRUE(wait_for([&] { return c.logs.has("certificate"); }, 3000)) << c.logs.all();
  }
}

// --- a server of our own -----------------------------------------------------------

// A password (in the userinfo and as a query parameter) authenticates and never
// shows; a wrong one is refused, logged, and never shown either.
TEST(PostgresOwn, PasswordsNeverInLogsOrSnapshots) {
  OWN_SERVER_OR_SKIP(server);
  {
    LoggedClient c(server->password_url(OwnServer::kPassword), {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    EXPECT_EQ(snapshot(c).find(OwnServer::kPassword), std::string::npos) << snapshot(c);
    c.close();
    EXPECT_FALSE(c.logs.has(OwnServer::kPassword)) << c.logs.all();
  }
  {
    const std::string url =
        server->admin_url().replace(13, 8, "simba_pw") + "?password=" + OwnServer::kPassword;
    LoggedClient c(url, {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    EXPECT_EQ(snapshot(c).find(OwnServer::kPassword), std::string::npos) << snapshot(c);
  }
  {
    const std::string wrong = "Wr0ng-pw_0815";
    LoggedClient c(server->password_url(wrong), {1000, 200});
    ASSERT_NE(c, nullptr) << simba_last_error();
    EXPECT_EQ(simba_client_wait_live(c, 700), SIMBA_ETIMEDOUT);
    EXPECT_TRUE(wait_for([&] { return c.logs.has("password authentication failed"); }, 3000))
        << c.logs.all();
    EXPECT_EQ(snapshot(c).find(wrong), std::string::npos);
    c.close();
    EXPECT_FALSE(c.logs.has(wrong)) << c.logs.all();
  }
}

// The server stops answering (SIGSTOP) for longer than the lease: SUSPENDED,
// then the term ends with DEADLINE_PASSED; after SIGCONT the client opens a new
// session and is elected again with a larger token.
TEST(PostgresOwn, StoppedServerPastTheLeaseThenNewSession) {
  OWN_SERVER_OR_SKIP(server);
  Election e;
  Client c;
  ASSERT_EQ(c.open(server->admin_url(), Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid1 = session_id(c);
  ASSERT_EQ(e.start(c, "pg.stop." + unique_id()), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const uint64_t tok1 = e.last_elected().token;

  const int64_t stop_at = mono_ns();
  server->signal(SIGSTOP);
  EXPECT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       1000 * slow_factor()));
  ASSERT_TRUE(e.wait_revoked(1, 5000 * slow_factor()));
  const int64_t took_ms = (e.last_revoked().at_ns - stop_at) / kMsNs;
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  EXPECT_LE(took_ms, 1000 + 500 * slow_factor()) << "revoked " << took_ms << " ms after SIGSTOP";
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);
  sleep_ms(300);  // a little past the lease, still stopped

  server->signal(SIGCONT);
  ASSERT_TRUE(e.wait_elected(2, 10'000 * slow_factor())) << snapshot(c);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_NE(session_id(c), sid1);
  EXPECT_GT(e.last_elected().token, tok1);
  EXPECT_EQ(e.pairing_errors(), 0);
}

// Issue 44 (ADR 0030): a keep-alive gets no answer (the server stopped), so
// its connection is closed; then the holder stops and closes as `simba run`
// does on SIGTERM while the server still does not answer. The close is sent
// again, on a new connection, until the session's local deadline: the lease
// is freed once the server answers again, not when the session expires.
TEST(PostgresOwn, AStopAndCloseAfterATimedOutKeepAliveFreeTheLeaseOnceTheServerAnswers) {
  OWN_SERVER_OR_SKIP(server);
  const std::string name = "pg.stall." + unique_id();
  // An 8 s lease; calls time out after 1 s.
  LoggedClient c(server->admin_url(), Timing{8000, 1000});
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 10'000 * slow_factor())) << c.logs.all();
  const std::string holder_sql =
      "SELECT coalesce(session_id::text, '') FROM simba_lease WHERE name = $1";
  ASSERT_FALSE(PgSync(server->admin_url()).q(holder_sql, {name}).empty());
  const int64_t stopped = mono_ms();
  server->signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       4000 * slow_factor(), 1))
      << c.logs.all();
  const StopCloseTimes t =
      stop_and_close_while_stalled(e, c, 3000, [&] { server->signal(SIGCONT); });
  EXPECT_EQ(PgSync(server->admin_url()).q(holder_sql, {name}), "") << c.logs.all();
  EXPECT_GE(t.closed_ms, t.resumed_ms) << "the close gave up while the server did not answer";
  // The session could expire on the server 7 s after the SIGSTOP at the earliest.
  EXPECT_LT(t.closed_ms - stopped, 7000) << c.logs.all();
}

// Issue 44 (ADR 0030): as above, but the holder only stops its election and
// the client stays open, so no close frees the lease: the failed release is
// sent again, and the lease is free once the server answers again, by the
// retry, not by a keep-alive's orphan release nor the session's expiry.
TEST(PostgresOwn, AStopAfterATimedOutKeepAliveFreesTheLeaseByItsRetryWithoutAClose) {
  OWN_SERVER_OR_SKIP(server);
  const std::string name = "pg.stall.stop." + unique_id();
  // A 20 s lease; keep-alives every 2 s, calls time out after 2 s: twenty
  // times the first retry's backoff.
  const Timing timing{20'000, 2000};
  LoggedClient c(server->admin_url(), timing);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 10'000 * slow_factor())) << c.logs.all();
  const std::string holder_sql =
      "SELECT coalesce(session_id::text, '') FROM simba_lease WHERE name = $1";
  ASSERT_FALSE(PgSync(server->admin_url()).q(holder_sql, {name}).empty());
  const int64_t stopped = mono_ms();
  server->signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       6000 * slow_factor(), 1))
      << c.logs.all();
  // Resumed once a retry too got no answer.
  std::unique_ptr<PgSync> db;
  const StopOnlyTimes t = stop_while_stalled(
      e, mono_ms() + 2 * timing.renew_ms + 500, [&] { server->signal(SIGCONT); },
      [&] {
        if (!db) db = std::make_unique<PgSync>(server->admin_url());
        return db->q(holder_sql, {name}).empty();
      },
      4 * timing.renew_ms);
  expect_freed_by_the_retry(t, c, name, timing.renew_ms);
  // The session could expire on the server 18 s after the SIGSTOP at the earliest.
  EXPECT_LT(t.freed_ms - stopped, 14'000) << c.logs.all();
}

// The server restarts (a fast shutdown, then a crash and its recovery): the
// calls in flight fail, the client reconnects, and tokens keep increasing
// across the restarts, since lease rows are durable and never deleted. The
// server runs with synchronous_commit=off, under which a crash loses the last
// commits (and a token would come back): Simba turns it on for its own
// connections.
TEST(PostgresOwn, RestartsKeepTokensIncreasing) {
  OWN_SERVER_OR_SKIP(server);
  Election e;
  Client c;
  ASSERT_EQ(c.open(server->admin_url(), Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "pg.restart." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));

  for (int sig : {SIGINT, SIGQUIT}) {
    const int before = e.elected_count();
    server->stop(sig);
    EXPECT_TRUE(wait_for([&] { return simba_client_status(c) != SIMBA_SESSION_LIVE; },
                         2000 * slow_factor()))
        << snapshot(c);
    // Down past the lease: the term ends, the session expires on the server.
    ASSERT_TRUE(e.wait_revoked(before, 5000 * slow_factor()));
    ASSERT_TRUE(server->start());
    ASSERT_TRUE(e.wait_elected(before + 1, 10'000 * slow_factor())) << snapshot(c);
    EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  }
  const auto& el = e.elected();
  for (size_t i = 1; i < el.size(); ++i) EXPECT_GT(el[i].token, el[i - 1].token);
  EXPECT_EQ(e.pairing_errors(), 0);
}

// --- release and close commit asynchronously (ADR 0023) -------------------------

// The own server restarted with settings under which a commit's WAL record
// stays in shared memory until a durable commit flushes it: nothing else writes
// WAL (no standby snapshots with wal_level=minimal, no autovacuum, no timed
// checkpoint), and the WAL writer, which flushes asynchronous commits every
// wal_writer_delay (10 s at most, a tick a test could meet at any moment), is
// stopped with SIGSTOP. So a crash right after an asynchronous commit loses it.
// fsync on, as in production. Restored to the usual settings at the end.
class CrashableServer {
 public:
  explicit CrashableServer(OwnServer* s) : s_(s) {
    s_->stop();
    s_->set_extra_settings({"fsync=on", "wal_writer_delay=10000", "wal_level=minimal",
                            "max_wal_senders=0", "autovacuum=off", "checkpoint_timeout=3600"});
    ok_ = start();
  }
  ~CrashableServer() {
    s_->stop();  // continues the WAL writer first
    s_->set_extra_settings({});
    s_->start();
  }
  bool ok() const { return ok_; }

  // Starts the server (again, after a crash) with its WAL writer stopped. The
  // postmaster starts the WAL writer as it opens for connections (after crash
  // recovery), so the first connection may come before it is listed.
  bool start() {
    if (!s_->start()) return false;
    PgSync admin(s_->admin_url());
    pid_t wal_writer = 0;
    wait_for(
        [&] {
          wal_writer = static_cast<pid_t>(
              std::atol(admin.q("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
                            .c_str()));
          return wal_writer > 0;
        },
        10'000 * slow_factor(), 20);
    return wal_writer > 0 && kill(wal_writer, SIGSTOP) == 0;
  }

 private:
  OwnServer* s_;
  bool ok_ = false;
};

// "t" when every WAL record inserted so far is flushed, "f" when some is not.
std::string wal_flushed(PgSync& admin) {
  return admin.q("SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()");
}

// Keep-alives answered so far: the count of the keep-alive round-trip histogram.
int64_t keep_alives_answered(simba_client_t* c) {
  const std::string s = snapshot(c);
  const size_t at = s.find("\"keep_alive_rtt\":");
  return at == std::string::npos ? -1 : json_int(s.substr(at), "count");
}

// Waits until `c` sent one more keep-alive than `before` and had its answer
// (not a fixed sleep: a loaded machine or a sanitizer delays the answer).
bool next_keep_alive(simba_client_t* c, int64_t before) {
  const int64_t answered = keep_alives_answered(c);
  if (!wait_for([&] { return counter(c, "keep_alives") > before; }, 10'000 * slow_factor()) ||
      !wait_for([&] { return keep_alives_answered(c) > answered; }, 10'000 * slow_factor(), 1)) {
    return false;
  }
  return simba_client_status(c) == SIMBA_SESSION_LIVE;
}

// What the server's WAL shows of each operation: an acquire and a keep-alive
// are flushed before they are answered (synchronous_commit on, forced by the
// client even though this server has it off), a release and a close are not
// (synchronous_commit off in their own transaction), and the next durable
// commit flushes the release's record with its own, since WAL is flushed in
// order.
TEST(PostgresOwn, ReleaseAndCloseCommitAsynchronouslyAcquireAndKeepAliveDurably) {
  OWN_SERVER_OR_SKIP(server);
  CrashableServer crashable(server);
  ASSERT_TRUE(crashable.ok());
  PgSync admin(server->admin_url());
  ASSERT_TRUE(admin.ok()) << admin.error();
  const std::string name = "pg.async." + unique_id();
  Client c;
  ASSERT_EQ(c.open(server->admin_url(), Timing{6000, 2000}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  EXPECT_EQ(wal_flushed(admin), "t") << "after the open";

  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Right after a keep-alive, so that the next one is 2 s away.
    ASSERT_TRUE(next_keep_alive(c, counter(c, "keep_alives")));
    EXPECT_EQ(wal_flushed(admin), "t") << "after a keep-alive";
    simba_term_t* t = nullptr;
    ASSERT_EQ(simba_lock_acquire(&t, c, name.c_str(), 5000), SIMBA_OK) << simba_last_error();
    EXPECT_EQ(wal_flushed(admin), "t") << "after an acquire";
    ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
    EXPECT_EQ(wal_flushed(admin), "f") << "after a release";
    // The next durable commit (here the keep-alive) flushes the release too.
    ASSERT_TRUE(next_keep_alive(c, counter(c, "keep_alives")));
    EXPECT_EQ(wal_flushed(admin), "t") << "after the keep-alive that followed the release";
  }
  // A release followed by an acquire: the acquire's flush covers both.
  simba_term_t* t = nullptr;
  ASSERT_EQ(simba_lock_acquire(&t, c, name.c_str(), 5000), SIMBA_OK);
  ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
  EXPECT_EQ(wal_flushed(admin), "f");
  ASSERT_EQ(simba_lock_acquire(&t, c, name.c_str(), 5000), SIMBA_OK);
  EXPECT_EQ(wal_flushed(admin), "t") << "the acquire after a release";
  c.close();  // frees the lease held: one simba_close
  EXPECT_EQ(wal_flushed(admin), "f") << "after the close";
  simba_term_release(t);  // the caller's reference; the close revoked the term
}

// A crash right after a release whose commit was not flushed yet, and the
// restart: the release is lost, so the lease row names the old session again;
// the name is free again no later than that session's expiry (at once when
// its client is still running: its next keep-alive lists a lease it holds no
// term for, and it releases it; at the expiry when the client closed, its
// close lost too); the next acquire, by another session, gets a token above
// every token handed out before the crash; and no two terms overlap.
TEST(PostgresOwn, CrashAfterAnUnflushedReleaseLosesNoSafety) {
  OWN_SERVER_OR_SKIP(server);
  CrashableServer crashable(server);
  ASSERT_TRUE(crashable.ok());
  const int64_t lease_ms = 4000;
  for (const bool old_client_closes : {false, true}) {
    SCOPED_TRACE(old_client_closes ? "the old client closed before the crash"
                                   : "the old client runs on");
    const std::string name = "pg.crash." + unique_id();
    auto a = std::make_unique<Client>();
    ASSERT_EQ(a->open(server->admin_url(), Timing{lease_ms, lease_ms / 3}), SIMBA_OK);
    ASSERT_EQ(simba_client_wait_live(*a, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    const std::string sid_a = session_id(*a);
    uint64_t max_token = 0;
    int64_t a_last_term_end = 0;
    // Right after a keep-alive, so that none flushes the last release before the crash.
    ASSERT_TRUE(next_keep_alive(*a, counter(*a, "keep_alives")));
    for (int i = 0; i < 3; ++i) {  // tokens 1, 2, 3; the last release is the one lost
      simba_term_t* t = nullptr;
      ASSERT_EQ(simba_lock_acquire(&t, *a, name.c_str(), 5000), SIMBA_OK) << simba_last_error();
      EXPECT_GT(simba_term_token(t), max_token);
      max_token = simba_term_token(t);
      ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
      a_last_term_end = mono_ns();
    }
    if (old_client_closes) a->close();
    {
      PgSync admin(server->admin_url());
      ASSERT_EQ(wal_flushed(admin), "f") << "the last release (or close) is not flushed yet";
    }
    server->crash();
    ASSERT_TRUE(crashable.start());

    PgSync admin(server->admin_url());
    ASSERT_TRUE(admin.ok()) << admin.error();
    const std::vector<std::string> row = admin.rows(
        "SELECT coalesce(session_id::text, ''), token FROM simba_lease WHERE name = $1", {name});
    ASSERT_EQ(row.size(), 1u);
    // Recovery replayed every durable commit (the third acquire) and lost the
    // asynchronous release after it: the row is back to "held by A, token 3".
    EXPECT_EQ(row[0], sid_a + "|" + std::to_string(max_token)) << "the release was not lost";
    const bool lost = row[0] == sid_a + "|" + std::to_string(max_token);
    // A's session row: its expiry is that of its last durable keep-alive (or
    // its open); it is not revived once past.
    const std::string a_left_ms = admin.q(
        "SELECT floor(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint "
        "FROM simba_session WHERE id = $1::uuid",
        {sid_a});
    ASSERT_FALSE(a_left_ms.empty() || a_left_ms[0] == '!') << a_left_ms;
    const int64_t a_expires_at = mono_ns() + std::atoll(a_left_ms.c_str()) * kMsNs;
    EXPECT_LE(std::atoll(a_left_ms.c_str()), lease_ms);

    // B contends at once, and watches the row until it wins.
    Election e;
    Client b;
    ASSERT_EQ(b.open(server->admin_url(), Timing{lease_ms, lease_ms / 3}), SIMBA_OK);
    ASSERT_EQ(simba_client_wait_live(b, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    const std::string sid_b = session_id(b);
    ASSERT_EQ(e.start(b, name), SIMBA_OK);
    bool foreign_holder = false;
    ASSERT_TRUE(wait_for(
        [&] {
          const std::string h = admin.q(
              "SELECT coalesce(session_id::text, '') FROM simba_lease WHERE name = $1", {name});
          if (h != "" && h != sid_a && h != sid_b) foreign_holder = true;
          return e.elected_count() >= 1;
        },
        lease_ms + 10'000 * slow_factor(), 5))
        << snapshot(b);
    EXPECT_FALSE(foreign_holder);
    const Election::Elected won = e.last_elected();
    // Never a token handed out before: the counter update of every acquire
    // answered was durable.
    EXPECT_GT(won.token, max_token);
    // No two terms at once: A's last term ended (revoked, then released)
    // before the crash; B's began after it.
    EXPECT_GT(won.at_ns, a_last_term_end);
    // Free again no later than A's session expiry (with the slack of B's
    // attempt interval and the margin of a loaded machine).
    if (lost) {
      EXPECT_LE(won.at_ns, a_expires_at + (lease_ms / 3 + 500) * kMsNs * slow_factor())
          << "won " << (won.at_ns - a_expires_at) / kMsNs << " ms after A's session expired";
    }
    if (old_client_closes && lost) {
      // Nobody released it (A's close was lost with the release): it stayed
      // A's until the session expired, never two holders.
      EXPECT_GE(won.at_ns, a_expires_at - 100 * kMsNs)
          << "won " << (a_expires_at - won.at_ns) / kMsNs << " ms before A's session expired";
    }
    const std::string held =
        admin.q("SELECT session_id::text || '|' || token FROM simba_lease WHERE name = $1", {name});
    EXPECT_EQ(held, sid_b + "|" + std::to_string(won.token));
    EXPECT_TRUE(e.leading());
    ASSERT_EQ(e.stop(5000 * slow_factor()), SIMBA_OK);
    EXPECT_EQ(e.pairing_errors(), 0);
    b.close();
    a.reset();
  }
}

// The TCP sockets of this process connected to 127.0.0.1:`port` (the clients
// of this test binary: none of another process shows in /proc/self/fd).
std::vector<int> sockets_to(int port) {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  while (struct dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d)) continue;
    struct sockaddr_in peer = {};
    socklen_t len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<struct sockaddr*>(&peer), &len) != 0) continue;
    if (peer.sin_family == AF_INET && ntohs(peer.sin_port) == port &&
        peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK)) {
      out.push_back(fd);
    }
  }
  closedir(d);
  return out;
}

int sockopt(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

// A host name in the URL is resolved by the backend (uv_getaddrinfo, then
// passed to libpq as hostaddr, so libpq never resolves on the loop) and the
// client goes live on the address it found.
TEST(PostgresOwn, HostNameIsResolved) {
  OWN_SERVER_OR_SKIP(server);
  const std::string port = std::to_string(server->port());
  LoggedClient c("postgresql://postgres@localhost:" + port + "/postgres", {1000, 200});
  ASSERT_NE(c, nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
  // Over TCP to the address localhost has here (the server listens on
  // 127.0.0.1 only), not through the Unix socket.
  EXPECT_FALSE(sockets_to(server->port()).empty());
  c.close();
  EXPECT_FALSE(c.logs.has("cannot resolve")) << c.logs.all();

  // A name that does not resolve fails in our resolver, whose words these are
  // (libpq's would be "could not translate host name"): never live, and the
  // close still returns.
  LoggedClient bad("postgresql://postgres@no-such-host.invalid:" + port + "/postgres", {1000, 200});
  ASSERT_NE(bad, nullptr) << simba_last_error();
  EXPECT_EQ(simba_client_wait_live(bad, 500), SIMBA_ETIMEDOUT);
  EXPECT_TRUE(wait_for([&] { return bad.logs.has("cannot resolve no-such-host.invalid"); },
                       5000 * slow_factor()))
      << bad.logs.all();
  EXPECT_FALSE(bad.logs.has("could not translate")) << bad.logs.all();
  const int64_t t0 = mono_ms();
  bad.close();
  EXPECT_LT(mono_ms() - t0, 30000);
}

// Both connections (commands and the LISTEN one) are made with TCP keep-alives
// (idle 5 s, every 2 s, 3 probes) and a 10 s TCP_USER_TIMEOUT, so a connection
// to a partitioned server dies in seconds, not after the system's 2 hours;
// libpq parameters in the URL win over these defaults. Read with getsockopt on
// the client's own sockets (same process).
TEST(PostgresOwn, ConnectionsHaveTcpKeepAlivesAndUserTimeout) {
  OWN_SERVER_OR_SKIP(server);
  struct Case {
    std::string params;
    int idle, interval, count, user_timeout_ms;
  };
  const Case cases[] = {
      {"", 5, 2, 3, 10000},
      {"?keepalives_idle=7&keepalives_interval=1&keepalives_count=4&tcp_user_timeout=4000", 7, 1, 4,
       4000},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE("URL parameters: " + k.params);
    ASSERT_TRUE(sockets_to(server->port()).empty()) << "a socket left from before";
    Election e;  // a candidate: the client also LISTENs on its second connection
    LoggedClient c(server->admin_url() + k.params, {2000, 400});
    ASSERT_NE(c, nullptr) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
    ASSERT_EQ(e.start(c, "pg.keepalive." + unique_id()), SIMBA_OK);
    ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
    ASSERT_TRUE(wait_for([&] { return c.logs.has("listening for release broadcasts"); },
                         3000 * slow_factor()))
        << c.logs.all();
    const std::vector<int> fds = sockets_to(server->port());
    EXPECT_EQ(fds.size(), 2u) << "a command and a LISTEN connection";
    for (int fd : fds) {
      EXPECT_EQ(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), 1) << "fd " << fd;
      EXPECT_EQ(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE), k.idle) << "fd " << fd;
      EXPECT_EQ(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL), k.interval) << "fd " << fd;
      EXPECT_EQ(sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT), k.count) << "fd " << fd;
      EXPECT_EQ(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), k.user_timeout_ms) << "fd " << fd;
    }
    ASSERT_EQ(e.stop(5000 * slow_factor()), SIMBA_OK);
    c.close();
    EXPECT_TRUE(wait_for([&] { return sockets_to(server->port()).empty(); }, 2000));
  }
}

}  // namespace

#endif  // SIMBA_WITH_POSTGRES
