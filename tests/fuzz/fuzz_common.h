// Shared by the fuzz targets of tests/fuzz/: a bounded reader over the input
// and the check macro. Each target defines LLVMFuzzerTestOneInput; it is linked
// either with libFuzzer (clang, scripts/fuzz.sh) or with replay_main.cpp, which
// replays the corpus and a deterministic batch of mutations (ctest label fuzz).
#ifndef SIMBA_TESTS_FUZZ_FUZZ_COMMON_H
#define SIMBA_TESTS_FUZZ_FUZZ_COMMON_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

// A property the target asserts: abort (a crash to libFuzzer, a failure to the
// replay driver) with the message.
#define FUZZ_CHECK(cond, ...)                                                       \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                            \
      std::fprintf(stderr, "\n");                                                   \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

namespace fuzz {

// Consumes the input front to back; reads past the end give zeros / empty.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  size_t left() const { return n_; }
  uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  int64_t int64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return static_cast<int64_t>(v);
  }
  // A string of up to `max` bytes, its length taken from the next byte.
  std::string str(size_t max = 255) {
    size_t len = byte();
    if (len > max) len = max;
    if (len > n_) len = n_;
    std::string s(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    n_ -= len;
    return s;
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(p_), n_);
    p_ += n_;
    n_ = 0;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

// How many times `needle` occurs in `hay` (overlapping).
inline size_t count(const std::string& hay, const std::string& needle) {
  if (needle.empty()) return 0;
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// `url` with its one occurrence of `secret` replaced by as many 'Q's: the same
// URL as far as the parsers go, minus the secret. A message about `url` shows
// the secret only if it holds more occurrences of it than the message about
// this one (where the secret can only come from the message's own words).
inline std::string without_secret(const std::string& url, const std::string& secret) {
  std::string out = url;
  const size_t at = out.find(secret);
  if (at != std::string::npos) out.replace(at, secret.size(), std::string(secret.size(), 'Q'));
  return out;
}

}  // namespace fuzz

#endif
