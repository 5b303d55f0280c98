// postgresql:// URLs: the parser (ours around libpq's PQconninfoParse) never
// crashes, accepts only valid schema names and ports, and never shows a
// password (password=, sslpassword= or the userinfo's) in redact_url or in
// the message of a URL refused.
#include "backend/backend.h"
#include "backend/postgres/postgres_url.h"
#include "fuzz_common.h"

namespace {

void check_secret(const std::string& url, const std::string& shown, const std::string& pw) {
  if (pw.size() < 4 || pw.find_first_of("*Q") != std::string::npos || fuzz::count(url, pw) != 1)
    return;
  FUZZ_CHECK(shown.find(pw) == std::string::npos, "redact_url shows a password");
  if (pw.size() < 8) return;
  const std::string bad = url + (url.find('?') == std::string::npos ? "?zz9=1" : "&zz9=1");
  simba::PostgresUrl ignored;
  std::string err2;
  // libpq reads a '?' inside the userinfo as part of the password, so what
  // follows may be a database name rather than the query: no error to check.
  if (simba::parse_postgres_url(bad, &ignored, &err2)) return;
  std::string err3;
  (void)simba::parse_postgres_url(fuzz::without_secret(bad, pw), &ignored, &err3);
  FUZZ_CHECK(fuzz::count(err2, pw) <= fuzz::count(err3, pw), "error shows a password: %s",
             err2.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  // libpq's parser works on C strings: what follows a NUL is not part of the URL.
  if (url.find('\0') != std::string::npos) return 0;
  simba::PostgresUrl p;
  std::string error;
  const std::string shown = simba::redact_url(url);
  if (!simba::parse_postgres_url(url, &p, &error)) {
    FUZZ_CHECK(!error.empty(), "refused without a message");
    return 0;
  }
  FUZZ_CHECK(!p.schema.empty() && p.schema.size() <= 48, "schema of %zu", p.schema.size());
  (void)p.where();
  check_secret(url, shown, p.option("password"));
  check_secret(url, shown, p.option("sslpassword"));
  return 0;
}
