// The simba tool's duration parser (tools/simba/util.c) against the library's
// (src/core/config.cpp): the CLI promises to parse durations "as the library
// does", so on every C string they agree, value included.
#include <string>

#include "core/config.h"
#include "fuzz_common.h"

extern "C" bool cli_parse_duration(const char* text, int64_t* out_ms);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  text.resize(std::char_traits<char>::length(text.c_str()));  // a C string
  int64_t cli = -1;
  const bool cli_ok = cli_parse_duration(text.c_str(), &cli);
  const std::optional<simba::Duration> lib = simba::parse_duration(text);
  FUZZ_CHECK(cli_ok == lib.has_value(), "\"%s\": cli %d, library %d", text.c_str(), cli_ok,
             lib.has_value());
  if (cli_ok) {
    FUZZ_CHECK(cli == simba::to_ms(*lib), "\"%s\": cli %lld ms, library %lld ms", text.c_str(),
               static_cast<long long>(cli), static_cast<long long>(simba::to_ms(*lib)));
  }
  return 0;
}
