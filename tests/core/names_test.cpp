// Tests of the lease-name rule (src/core/names.*): 1-128 characters of
// [A-Za-z0-9._:-], other than "." and "..".
#include "core/names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace simba {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
bool one_line(const std::string& s) { return s.find('\n') == std::string::npos; }

bool is_allowed(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

TEST(LeaseName, ValidNames) {
  for (const char* n : {"a",
                        "Z",
                        "0",
                        "report",
                        "billing.3",
                        "ledger:eu-west_1",
                        "A-Z.a_z:0-9",
                        "-",
                        "_",
                        ":",
                        "...",
                        "....",
                        ".a",
                        "a.",
                        "..a",
                        "a..",
                        "a.b",
                        "a..b",
                        "-leading-dash",
                        "trailing:",
                        "0000",
                        "UPPER",
                        "v1.2.3-rc.1",
                        "ns::name",
                        "__init__"}) {
    EXPECT_EQ(check_lease_name(n), "") << n;
  }
}

TEST(LeaseName, EveryLetterAndDigit) {
  EXPECT_EQ(check_lease_name("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"), "");
}

TEST(LeaseName, EachAllowedPunctuation) {
  for (char p : {'.', '_', ':', '-'}) {
    std::string inside = std::string("a") + p + "b";
    std::string alone(1, p);
    std::string twice(2, p);
    EXPECT_EQ(check_lease_name(inside), "") << inside;
    if (p != '.') {
      EXPECT_EQ(check_lease_name(alone), "") << alone;
      EXPECT_EQ(check_lease_name(twice), "") << twice;
    }
  }
}

TEST(LeaseName, LengthBounds) {
  EXPECT_EQ(check_lease_name("x"), "");
  EXPECT_EQ(check_lease_name(std::string(127, 'x')), "");
  EXPECT_EQ(check_lease_name(std::string(128, 'x')), "");
  EXPECT_EQ(check_lease_name(std::string(128, '.')), "");

  std::string err = check_lease_name(std::string(129, 'x'));
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(contains(err, "129")) << err;
  EXPECT_TRUE(contains(err, "128")) << err;

  err = check_lease_name(std::string(100000, 'x'));
  EXPECT_TRUE(contains(err, "100000")) << err;
  EXPECT_LT(err.size(), 300u) << "the name itself is not echoed";
}

TEST(LeaseName, Empty) {
  std::string err = check_lease_name("");
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(contains(err, "empty")) << err;
  EXPECT_FALSE(check_lease_name(std::string_view()).empty());
}

TEST(LeaseName, DotAndDotDot) {
  for (const char* n : {".", ".."}) {
    std::string err = check_lease_name(n);
    EXPECT_FALSE(err.empty()) << n;
    EXPECT_TRUE(contains(err, std::string("\"") + n + "\"")) << err;
  }
  EXPECT_EQ(check_lease_name("..."), "");
}

TEST(LeaseName, BadCharacterIsNamedWithItsIndex) {
  std::string err = check_lease_name("a b");
  EXPECT_TRUE(contains(err, "' '")) << err;
  EXPECT_TRUE(contains(err, "index 1")) << err;

  err = check_lease_name("a/b");
  EXPECT_TRUE(contains(err, "'/'")) << err;
  EXPECT_TRUE(contains(err, "index 1")) << err;

  err = check_lease_name("/");
  EXPECT_TRUE(contains(err, "'/'") && contains(err, "index 0")) << err;

  err = check_lease_name("../etc");
  EXPECT_TRUE(contains(err, "'/'") && contains(err, "index 2")) << err;

  err = check_lease_name("caf\xC3\xA9");
  EXPECT_TRUE(contains(err, "\\xC3")) << err;
  EXPECT_TRUE(contains(err, "index 3")) << err;

  err = check_lease_name(std::string(127, 'a') + "*");
  EXPECT_TRUE(contains(err, "'*'") && contains(err, "index 127")) << err;

  err = check_lease_name("a\tb");
  EXPECT_TRUE(contains(err, "\\x09")) << err;
  err = check_lease_name("a\nb");
  EXPECT_TRUE(contains(err, "\\x0A")) << err;
  EXPECT_TRUE(one_line(err)) << err;
  err = check_lease_name("x\x7f");
  EXPECT_TRUE(contains(err, "\\x7F") && contains(err, "index 1")) << err;
  err = check_lease_name("\xff");
  EXPECT_TRUE(contains(err, "\\xFF")) << err;
  err = check_lease_name("a'b");
  EXPECT_TRUE(contains(err, "'\\''")) << err;
  err = check_lease_name("a\\b");
  EXPECT_TRUE(contains(err, "'\\\\'")) << err;
}

TEST(LeaseName, EmbeddedNulIsABadCharacter) {
  std::string err = check_lease_name(std::string_view("ab\0c", 4));
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(contains(err, "NUL byte")) << err;
  EXPECT_TRUE(contains(err, "index 2")) << err;
  EXPECT_FALSE(check_lease_name(std::string_view("\0", 1)).empty());
  EXPECT_FALSE(check_lease_name(std::string_view("a\0", 2)).empty());
  EXPECT_FALSE(check_lease_name(std::string_view(".\0", 2)).empty());
}

TEST(LeaseName, FirstBadCharacterIsReported) {
  std::string err = check_lease_name("ok/then space");
  EXPECT_TRUE(contains(err, "'/'") && contains(err, "index 2")) << err;
}

TEST(LeaseName, LengthIsCheckedBeforeCharacters) {
  std::string err = check_lease_name(std::string(129, ' '));
  EXPECT_TRUE(contains(err, "129")) << err;
}

TEST(LeaseName, RejectedPunctuation) {
  for (char c : std::string(" !\"#$%&'()*+,/;<=>?@[\\]^`{|}~")) {
    std::string name = std::string("x") + c + "y";
    std::string err = check_lease_name(name);
    EXPECT_FALSE(err.empty()) << name;
    EXPECT_TRUE(contains(err, "index 1")) << err;
    EXPECT_TRUE(one_line(err));
  }
}

TEST(LeaseName, EveryByteValue) {
  for (int b = 0; b < 256; ++b) {
    unsigned char c = static_cast<unsigned char>(b);
    std::string name = "a";
    name += static_cast<char>(c);
    name += "a";
    std::string err = check_lease_name(name);
    if (is_allowed(c)) {
      EXPECT_EQ(err, "") << "byte " << b;
    } else {
      EXPECT_FALSE(err.empty()) << "byte " << b;
      EXPECT_TRUE(contains(err, "index 1")) << err;
      EXPECT_TRUE(one_line(err)) << err;
    }
    std::string single(1, static_cast<char>(c));
    EXPECT_EQ(check_lease_name(single).empty(), is_allowed(c) && c != '.') << "byte " << b;
  }
}

TEST(LeaseName, MessagesNameTheRule) {
  for (std::string n : {std::string(""), std::string("."), std::string(".."), std::string("a b"),
                        std::string(200, 'q')}) {
    std::string err = check_lease_name(n);
    EXPECT_TRUE(contains(err, "[A-Za-z0-9._:-]")) << err;
    EXPECT_TRUE(contains(err, "lease name")) << err;
  }
}

TEST(LeaseName, UsesOnlyTheView) {
  const char buf[] = "good name";
  EXPECT_EQ(check_lease_name(std::string_view(buf, 4)), "");
  EXPECT_FALSE(check_lease_name(std::string_view(buf, 5)).empty());
}

}  // namespace
}  // namespace simba
