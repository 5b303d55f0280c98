// The key table that include/simba.h documents (under "Configuration") lists
// exactly the keys of the code's table (src/core/config.cpp, kKeys), in the
// same order: a key added to one and not the other fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace simba {
namespace {

// include/simba.h, found from this file's own path (tests/core/ in the source tree).
std::string header_path() {
  std::string here = __FILE__;
  const size_t cut = here.rfind("/tests/core/");
  if (cut == std::string::npos) return "";
  return here.substr(0, cut) + "/include/simba.h";
}

// The first cell of each row of the header's key table: the comment lines
// " * | key | default | value |" after the row whose first cell is "key", up to the
// first line that is not a table row.
std::vector<std::string> header_keys(const std::string& text) {
  std::vector<std::string> keys;
  std::istringstream in(text);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    const size_t bar = line.find("* |");
    if (bar == std::string::npos) {
      if (in_table) break;
      continue;
    }
    const size_t start = bar + 3;
    const size_t end = line.find('|', start);
    if (end == std::string::npos) continue;
    std::string cell = line.substr(start, end - start);
    cell.erase(0, cell.find_first_not_of(' '));
    cell.erase(cell.find_last_not_of(' ') + 1);
    if (!in_table) {
      in_table = cell == "key";
      continue;
    }
    if (cell.find_first_not_of('-') == std::string::npos) continue;  // the |---| row
    keys.push_back(cell);
  }
  return keys;
}

TEST(ConfigKeyTable, HeaderListsExactlyTheCodesKeys) {
  const std::string path = header_path();
  ASSERT_FALSE(path.empty()) << "cannot place include/simba.h from " << __FILE__;
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "cannot read " << path;
  std::stringstream text;
  text << f.rdbuf();

  std::vector<std::string> code;
  for (std::string_view k : config_key_names()) code.emplace_back(k);
  const std::vector<std::string> header = header_keys(text.str());
  EXPECT_FALSE(code.empty());
  EXPECT_EQ(header, code) << "the key table of " << path << " and kKeys in src/core/config.cpp";
}

TEST(ConfigKeyTable, EveryKeyIsKnownToSet) {
  for (std::string_view k : config_key_names()) {
    Config c;
    EXPECT_EQ(c.set(k, "").find("unknown key"), std::string::npos) << k;
  }
}

}  // namespace
}  // namespace simba
