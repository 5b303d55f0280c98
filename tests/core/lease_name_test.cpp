// Tests of the shared lease name (src/core/lease_name.*): copies share one
// block, the text is NUL-terminated, and the count survives copies and drops
// from many threads (the engine drops a term's copy on whatever thread frees it).
#include "core/lease_name.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace simba {
namespace {

TEST(LeaseNameBlock, EmptyHoldsNothing) {
  LeaseName n;
  EXPECT_TRUE(n.empty());
  EXPECT_EQ(n.size(), 0u);
  EXPECT_STREQ(n.c_str(), "");
  EXPECT_TRUE(LeaseName("").empty());
  EXPECT_EQ(n, "");
}

TEST(LeaseNameBlock, CopiesShareOneBlock) {
  const std::string text = "orders/shard-0042/leader";  // longer than std::string's SSO
  LeaseName a(text);
  LeaseName b = a;
  LeaseName c;
  c = b;
  EXPECT_EQ(a.c_str(), b.c_str());
  EXPECT_EQ(a.c_str(), c.c_str());
  EXPECT_EQ(c, text);
  EXPECT_EQ(c.str(), text);
  EXPECT_EQ(c.size(), text.size());
  EXPECT_EQ(c.c_str()[text.size()], '\0');
  a = LeaseName("other");  // the others keep the old block
  EXPECT_EQ(b, text);
  EXPECT_EQ(a, "other");
  EXPECT_NE(a, b);
}

TEST(LeaseNameBlock, MoveLeavesTheSourceEmpty) {
  LeaseName a("jobs/nightly");
  const char* chars = a.c_str();
  LeaseName b(std::move(a));
  EXPECT_EQ(b.c_str(), chars);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from name is empty
  LeaseName& alias = b;
  b = std::move(alias);  // a self-move keeps it
  EXPECT_EQ(b, "jobs/nightly");
}

TEST(LeaseNameBlock, ComparesAsTextOnEitherSide) {
  const LeaseName n("a/b");
  const std::string same = "a/b";
  EXPECT_TRUE(n == same && same == n && n == "a/b" && "a/b" == n);
  EXPECT_TRUE(n == std::string_view("a/b") && std::string_view("a/b") == n);
  EXPECT_TRUE(n == LeaseName(same));
  EXPECT_TRUE(n != "a/c" && "a/c" != n && n != LeaseName("a/c"));
  EXPECT_TRUE(LeaseName(static_cast<const char*>(nullptr)).empty());
}

TEST(LeaseNameBlock, ConcatenatesAsAString) {
  LeaseName n("a/b");
  EXPECT_EQ("lease " + n + " token", "lease a/b token");
  EXPECT_EQ(std::string("[") + n, "[a/b");
  EXPECT_EQ(n + std::string("]"), "a/b]");
}

// Copies made and dropped on several threads at once: no block is freed twice
// or while in use (ASan, TSan and valgrind run this test).
TEST(LeaseNameBlock, CountedAcrossThreads) {
  LeaseName shared("partition/7");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&shared] {
      for (int i = 0; i < 20000; ++i) {
        LeaseName copy = shared;
        LeaseName moved = std::move(copy);
        ASSERT_EQ(moved, "partition/7");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(shared, "partition/7");
}

// ADR 0043: a name inside its owner's block is not counted, so a copy is a
// heap name of its own that outlives the owner's bytes; borrow() shares them.
TEST(LeaseNameBlock, InlineNamesCopyOutAndBorrowShares) {
  alignas(8) char owner[64];
  std::memset(owner, 'x', sizeof owner);
  ASSERT_LE(LeaseName::inline_bytes("jobs/nightly"), sizeof owner);
  LeaseName copy;
  {
    LeaseName in = LeaseName::make_inline(owner, "jobs/nightly");
    EXPECT_EQ(in.view(), "jobs/nightly");
    LeaseName borrowed = LeaseName::borrow(in);
    EXPECT_EQ(borrowed.c_str(), in.c_str());  // the owner's bytes, shared
    copy = in;
    EXPECT_NE(copy.c_str(), in.c_str());  // a block of its own
  }
  std::memset(owner, 'y', sizeof owner);  // the owner's bytes are gone
  EXPECT_EQ(copy.view(), "jobs/nightly");
  EXPECT_EQ(LeaseName::borrow(copy).c_str(), copy.c_str());  // a heap name: counted
}

}  // namespace
}  // namespace simba
