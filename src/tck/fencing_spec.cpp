// The fencing spec of libsimba_tck (include/simba/tck.h): a few sequential cases
// that pin the token rule, then rounds of concurrent writers that a resource whose
// check and write are not one atomic step cannot pass.
//
// Everything the kit knows about a write it learns from the resource's answers and
// from the values it reads back: each value carries the token it was written with
// ("t<token>.w<writer>.n<n>"), so a read tells which write the resource holds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "simba/tck.h"

struct simba_tck_report {
  struct Case {
    std::string name;
    std::string detail;  // empty when the case passed
  };
  std::vector<Case> cases;
  std::string text;
  uint64_t seed = 0;
};

namespace simba::tck {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kDefaultWriters = 6;
constexpr uint32_t kMaxWriters = 64;
constexpr uint32_t kDefaultRounds = 100;
constexpr uint32_t kDefaultMaxDelayUs = 500;

// A violation of the spec: ends the current case (sequential cases) or is
// recorded and counted (concurrent rounds).
struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string make_value(uint64_t token, const std::string& tag) {
  return "t" + std::to_string(token) + "." + tag;
}

// The token a value was written with, or nullopt for a value the kit did not write.
std::optional<uint64_t> token_of(const std::string& value) {
  if (value.size() < 2 || value[0] != 't') return std::nullopt;
  uint64_t t = 0;
  size_t i = 1;
  for (; i < value.size() && value[i] >= '0' && value[i] <= '9'; ++i) {
    t = t * 10 + static_cast<uint64_t>(value[i] - '0');
  }
  if (i == 1 || i >= value.size() || value[i] != '.') return std::nullopt;
  return t;
}

const char* result_name(int r) {
  switch (r) {
    case SIMBA_TCK_ACCEPTED:
      return "accepted";
    case SIMBA_TCK_REJECTED:
      return "rejected";
    case SIMBA_TCK_ERROR:
      return "error";
    default:
      return "an unknown answer";
  }
}

// The resource, with the kit's expectations as helpers.
class Resource {
 public:
  explicit Resource(const simba_tck_resource_t& r) : r_(r) {}

  void reset() const {
    if (r_.reset(r_.ud) != 0) throw Violation("reset() failed");
  }

  // write() as the resource answers it; an error or an unknown answer is a violation.
  int write(uint64_t token, const std::string& value) const {
    const int got = r_.write(r_.ud, token, value.c_str());
    if (got != SIMBA_TCK_ACCEPTED && got != SIMBA_TCK_REJECTED) {
      throw Violation("write(token " + std::to_string(token) + ", \"" + value + "\") answered " +
                      result_name(got) + " (" + std::to_string(got) + ")");
    }
    return got;
  }

  void expect_write(uint64_t token, const std::string& value, int want,
                    const std::string& why) const {
    const int got = write(token, value);
    if (got != want) {
      throw Violation("write(token " + std::to_string(token) + ", \"" + value + "\") was " +
                      result_name(got) + ", expected " + result_name(want) + ": " + why);
    }
  }

  std::optional<std::string> read() const {
    char buf[SIMBA_TCK_VALUE_MAX + 1];
    std::memset(buf, 0, sizeof buf);
    const int got = r_.read(r_.ud, buf, SIMBA_TCK_VALUE_MAX);
    if (got < 0) throw Violation("read() failed");
    if (got == 0) return std::nullopt;
    buf[SIMBA_TCK_VALUE_MAX - 1] = '\0';
    return std::string(buf);
  }

  void expect_value(const std::string& want, const std::string& why) const {
    const std::optional<std::string> got = read();
    if (!got) throw Violation("read() found no value, expected \"" + want + "\": " + why);
    if (*got != want) {
      throw Violation("read() gave \"" + *got + "\", expected \"" + want + "\": " + why);
    }
  }

 private:
  const simba_tck_resource_t& r_;
};

// --- sequential cases ----------------------------------------------------------

void first_write_accepted(const Resource& r) {
  r.reset();
  if (const auto v = r.read()) {
    throw Violation("read() right after reset() gave \"" + *v + "\", expected no value");
  }
  r.expect_write(7, make_value(7, "first"), SIMBA_TCK_ACCEPTED, "the first write of an owner");
  r.expect_value(make_value(7, "first"), "the accepted write");
}

void equal_token_accepted(const Resource& r) {
  r.reset();
  r.expect_write(3, make_value(3, "a"), SIMBA_TCK_ACCEPTED, "the first write");
  r.expect_write(3, make_value(3, "a"), SIMBA_TCK_ACCEPTED,
                 "a retry with the same token and the same value is still accepted");
  r.expect_value(make_value(3, "a"), "after the retry");
  r.expect_write(3, make_value(3, "b"), SIMBA_TCK_ACCEPTED,
                 "the same term writes again with its token");
  r.expect_value(make_value(3, "b"), "the second write of the term");
}

void lower_token_rejected(const Resource& r) {
  r.reset();
  r.expect_write(8, make_value(8, "a"), SIMBA_TCK_ACCEPTED, "the first write");
  r.expect_write(7, make_value(7, "stale"), SIMBA_TCK_REJECTED,
                 "token 7 is lower than the accepted 8 (a paused old owner)");
  r.expect_value(make_value(8, "a"), "a rejected write changes nothing");
  r.expect_write(1, make_value(1, "stale"), SIMBA_TCK_REJECTED, "token 1 is lower than 8");
  r.expect_write(8, make_value(8, "b"), SIMBA_TCK_ACCEPTED,
                 "the owner of token 8 still writes after a stale write was rejected");
  r.expect_write(9, make_value(9, "a"), SIMBA_TCK_ACCEPTED, "a newer term");
  r.expect_write(8, make_value(8, "late"), SIMBA_TCK_REJECTED,
                 "token 8 is lower than the accepted 9");
  r.expect_value(make_value(9, "a"), "the newest term's write");
}

void non_consecutive_tokens_accepted(const Resource& r) {
  r.reset();
  // Gaps as ZooKeeper's czxid makes them (epoch << 32 | counter); the step from
  // (1 << 32) + 40 to (2 << 32) + 1 also catches tokens truncated to 32 bits.
  const uint64_t tokens[] = {1,
                             2,
                             5,
                             17,
                             1000,
                             (uint64_t{1} << 32) + 3,
                             (uint64_t{1} << 32) + 40,
                             (uint64_t{2} << 32) + 1,
                             (uint64_t{7} << 32) + 9};
  for (const uint64_t t : tokens) {
    r.expect_write(t, make_value(t, "gap"), SIMBA_TCK_ACCEPTED,
                   "tokens only need to increase, not to be consecutive");
    r.expect_value(make_value(t, "gap"), "the last accepted write");
  }
  const uint64_t older = (uint64_t{2} << 32) + 1;
  r.expect_write(older, make_value(older, "stale"), SIMBA_TCK_REJECTED,
                 "a lower token after a larger gap");
  const uint64_t last = (uint64_t{7} << 32) + 9;
  r.expect_value(make_value(last, "gap"), "a rejected write changes nothing");
}

// --- concurrent writers --------------------------------------------------------

struct WriteRecord {
  uint64_t token = 0;
  std::string value;
  int result = SIMBA_TCK_ERROR;
  Clock::time_point start, end;
  std::string error;  // a violation thrown by the write (an error answer)
};

// A one-shot gate: threads wait until open() so that they start together.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

void sleep_us(uint32_t us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

class ConcurrentWriters {
 public:
  ConcurrentWriters(const Resource& r, uint32_t writers, uint32_t rounds, uint32_t max_delay_us,
                    uint64_t seed)
      : r_(r), writers_(writers), rounds_(rounds), max_delay_us_(max_delay_us), rng_(seed) {}

  // Empty when every round passed, else the first violation and how many there were.
  std::string run() {
    uint64_t base = 0;
    for (uint32_t round = 0; round < rounds_; ++round) {
      base = one_round(round, base);
    }
    if (violations_ == 0) return "";
    std::string s = first_;
    if (violations_ > 1) {
      s += " (" + std::to_string(violations_) + " violations in " + std::to_string(failed_rounds_) +
           " of " + std::to_string(rounds_) + " rounds)";
    }
    return s;
  }

 private:
  void violation(uint32_t round, const std::string& what, bool* round_failed) {
    if (violations_++ == 0) first_ = "round " + std::to_string(round) + ": " + what;
    if (!*round_failed) ++failed_rounds_;
    *round_failed = true;
  }

  // What one writer of a round does: its token, its pause before the write, and
  // whether (and after how long) it retries.
  struct Plan {
    uint64_t token;
    uint32_t delay_us, retry_delay_us;
    bool retry;
  };

  // One round: returns the highest token used, the next round starts above it.
  uint64_t one_round(uint32_t round, uint64_t base) {
    bool failed = false;
    try {
      r_.reset();
    } catch (const Violation& v) {
      violation(round, v.what(), &failed);
      return base;
    }
    const std::vector<uint64_t> tokens = draw_tokens(base);
    const std::vector<Plan> plans = draw_plans(round, tokens);
    std::vector<WriteRecord> all;
    std::vector<uint64_t> seen;  // tokens the reader saw, in order
    std::string reader_error;
    run_writers(round, plans, &all, &seen, &reader_error);
    const uint64_t highest = *std::max_element(tokens.begin(), tokens.end());
    check_round(round, all, seen, reader_error, highest, &failed);
    return highest;
  }

  // The round's tokens, above base, in the order they are handed to the writers.
  std::vector<uint64_t> draw_tokens(uint64_t base) {
    // Tokens of successive terms, with random gaps, handed to writers in a random
    // order: a writer with a low token is an old owner that was slow to write.
    std::vector<uint64_t> tokens(writers_);
    uint64_t t = base;
    for (auto& tok : tokens) {
      t += 1 + rng_() % 3;
      tok = t;
    }
    std::shuffle(tokens.begin(), tokens.end(), rng_);
    return tokens;
  }

  // One plan per writer, with tokens[i] for writer i.
  std::vector<Plan> draw_plans(uint32_t round, const std::vector<uint64_t>& tokens) {
    // A third of the rounds start every writer at once; the rest spread them out.
    const uint32_t spread[] = {0, max_delay_us_ / 10, max_delay_us_};
    const uint32_t max_delay = spread[round % 3];
    std::vector<Plan> plans(writers_);
    for (uint32_t i = 0; i < writers_; ++i) {
      plans[i].token = tokens[i];
      plans[i].delay_us = max_delay ? static_cast<uint32_t>(rng_() % (max_delay + 1)) : 0;
      plans[i].retry = rng_() % 3 == 0;
      plans[i].retry_delay_us = max_delay ? static_cast<uint32_t>(rng_() % (max_delay / 2 + 1)) : 0;
    }
    return plans;
  }

  // Runs the writers and one reader together; *all gets every write, writer by
  // writer, *seen the tokens read and *reader_error the reader's violation.
  void run_writers(uint32_t round, const std::vector<Plan>& plans, std::vector<WriteRecord>* all,
                   std::vector<uint64_t>* seen, std::string* reader_error) {
    std::vector<std::vector<WriteRecord>> records(writers_);
    std::atomic<int> running{static_cast<int>(writers_)};
    Gate gate;

    std::vector<std::thread> threads;
    threads.reserve(writers_ + 1);
    for (uint32_t i = 0; i < writers_; ++i) {
      threads.emplace_back([&, i] {
        gate.wait();
        write_plan(round, i, plans[i], &records[i]);
        running.fetch_sub(1, std::memory_order_release);
      });
    }
    threads.emplace_back([&] {
      gate.wait();
      read_while(running, seen, reader_error);
    });
    gate.open();
    for (auto& th : threads) th.join();

    for (auto& rs : records) {
      for (auto& rec : rs) all->push_back(std::move(rec));
    }
  }

  // Writer i's writes (one, or two with a retry), each recorded in *records.
  void write_plan(uint32_t round, uint32_t i, const Plan& p, std::vector<WriteRecord>* records) {
    const std::string value =
        make_value(p.token, "w" + std::to_string(i) + ".n" + std::to_string(round));
    sleep_us(p.delay_us);  // the owner pauses between its token check and its write
    for (int attempt = 0; attempt < (p.retry ? 2 : 1); ++attempt) {
      if (attempt == 1) sleep_us(p.retry_delay_us);
      WriteRecord rec;
      rec.token = p.token;
      rec.value = value;
      rec.start = Clock::now();
      try {
        rec.result = r_.write(p.token, value);
      } catch (const Violation& v) {
        rec.error = v.what();
      }
      rec.end = Clock::now();
      records->push_back(std::move(rec));
    }
  }

  // The reader: reads while writers run, appending each kit-written token to *seen.
  void read_while(const std::atomic<int>& running, std::vector<uint64_t>* seen,
                  std::string* reader_error) {
    try {
      while (running.load(std::memory_order_acquire) > 0) {
        if (const auto v = r_.read()) {
          if (const auto tok = token_of(*v)) seen->push_back(*tok);
        }
        std::this_thread::yield();
      }
    } catch (const Violation& v) {
      *reader_error = v.what();
    }
  }

  void check_round(uint32_t round, const std::vector<WriteRecord>& all,
                   const std::vector<uint64_t>& seen, const std::string& reader_error,
                   uint64_t highest, bool* failed) {
    for (const auto& w : all) {
      if (!w.error.empty()) violation(round, w.error, failed);
    }
    if (!reader_error.empty()) violation(round, "reader: " + reader_error, failed);

    // Nothing beats the highest token: its writes must be accepted.
    for (const auto& w : all) {
      if (w.token == highest && w.error.empty() && w.result != SIMBA_TCK_ACCEPTED) {
        violation(round,
                  "write(token " + std::to_string(w.token) +
                      ") was rejected although no higher token was ever written",
                  failed);
      }
    }

    // In real time: a write that starts after a higher token's write was accepted
    // (returned) must be rejected; a rejected write needs a higher token accepted
    // before it returned.
    for (const auto& y : all) {
      if (!y.error.empty()) continue;
      for (const auto& x : all) {
        if (x.result != SIMBA_TCK_ACCEPTED || !x.error.empty() || x.token <= y.token) continue;
        if (y.result == SIMBA_TCK_ACCEPTED && x.end < y.start) {
          violation(round,
                    "write(token " + std::to_string(y.token) + ") was accepted after write(token " +
                        std::to_string(x.token) +
                        ") had been accepted: a stale owner's write landed",
                    failed);
        }
      }
      if (y.result == SIMBA_TCK_REJECTED) {
        const bool justified = std::any_of(all.begin(), all.end(), [&](const WriteRecord& x) {
          return x.result == SIMBA_TCK_ACCEPTED && x.token > y.token && x.start < y.end;
        });
        if (!justified) {
          violation(round,
                    "write(token " + std::to_string(y.token) +
                        ") was rejected although no higher token had been written",
                    failed);
        }
      }
    }

    // The reader never sees the token go back.
    for (size_t i = 1; i < seen.size(); ++i) {
      if (seen[i] < seen[i - 1]) {
        violation(round,
                  "a reader saw token " + std::to_string(seen[i - 1]) + " and then token " +
                      std::to_string(seen[i]) + ": a lower-token write landed after a higher one",
                  failed);
        break;
      }
    }

    // The final state comes from the highest token.
    try {
      const std::optional<std::string> v = r_.read();
      if (!v) {
        violation(round, "read() found no value after the round", failed);
      } else {
        const auto tok = token_of(*v);
        const bool known = std::any_of(all.begin(), all.end(), [&](const WriteRecord& w) {
          return w.value == *v && w.token == highest;
        });
        if (!known) {
          violation(round,
                    "the final value \"" + *v + "\" has token " +
                        (tok ? std::to_string(*tok) : std::string("?")) +
                        ", but the round's highest token is " + std::to_string(highest),
                    failed);
        }
      }
    } catch (const Violation& v) {
      violation(round, v.what(), failed);
    }
  }

  const Resource& r_;
  const uint32_t writers_, rounds_, max_delay_us_;
  std::mt19937_64 rng_;
  uint64_t violations_ = 0;
  uint32_t failed_rounds_ = 0;
  std::string first_;
};

uint64_t pick_seed() {
  std::random_device rd;
  const uint64_t s = (uint64_t{rd()} << 32) ^ rd() ^
                     static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return s ? s : 1;
}

void run_spec(simba_tck_report& rep, const simba_tck_resource_t& res,
              const simba_tck_options_t& o) {
  const Resource r(res);
  auto run_case = [&](const char* name, auto&& fn) {
    simba_tck_report::Case c;
    c.name = name;
    try {
      fn();
    } catch (const Violation& v) {
      c.detail = v.what();
      if (c.detail.empty()) c.detail = "failed";
    }
    rep.cases.push_back(std::move(c));
  };
  run_case("first_write_accepted", [&] { first_write_accepted(r); });
  run_case("equal_token_accepted", [&] { equal_token_accepted(r); });
  run_case("lower_token_rejected", [&] { lower_token_rejected(r); });
  run_case("non_consecutive_tokens_accepted", [&] { non_consecutive_tokens_accepted(r); });
  run_case("concurrent_writers", [&] {
    const std::string d = ConcurrentWriters(r, o.writers, o.rounds, o.max_delay_us, rep.seed).run();
    if (!d.empty()) throw Violation(d);
  });

  bool all = true;
  for (const auto& c : rep.cases) {
    rep.text +=
        c.detail.empty() ? "PASS " + c.name + "\n" : "FAIL " + c.name + ": " + c.detail + "\n";
    all = all && c.detail.empty();
  }
  rep.text += std::string(all ? "fencing spec: PASSED" : "fencing spec: FAILED") + " (" +
              std::to_string(rep.cases.size()) + " cases, " + std::to_string(o.writers) +
              " writers, " + std::to_string(o.rounds) + " rounds, seed " +
              std::to_string(rep.seed) + ")\n";
}

}  // namespace
}  // namespace simba::tck

extern "C" {

int simba_tck_run_fencing_spec(simba_tck_report_t** out, const simba_tck_resource_t* resource,
                               const simba_tck_options_t* opts) {
  if (out) *out = nullptr;
  if (!out || !resource || resource->version != SIMBA_TCK_RESOURCE_V1 || !resource->reset ||
      !resource->write || !resource->read) {
    return SIMBA_EINVAL;
  }
  simba_tck_options_t o{};
  if (opts) {
    if (opts->version != SIMBA_TCK_OPTIONS_V1) return SIMBA_EINVAL;
    o = *opts;
  }
  if (o.writers == 0) o.writers = simba::tck::kDefaultWriters;
  if (o.writers > simba::tck::kMaxWriters) return SIMBA_EINVAL;
  if (o.rounds == 0) o.rounds = simba::tck::kDefaultRounds;
  if (o.max_delay_us == 0) o.max_delay_us = simba::tck::kDefaultMaxDelayUs;
  try {
    auto rep = std::make_unique<simba_tck_report>();
    rep->seed = o.seed ? o.seed : simba::tck::pick_seed();
    simba::tck::run_spec(*rep, *resource, o);
    *out = rep.release();
    return SIMBA_OK;
  } catch (const std::bad_alloc&) {
    return SIMBA_ENOMEM;
  } catch (...) {
    // std::system_error from std::thread, or anything else: never cross the C ABI.
    return SIMBA_ENOMEM;
  }
}

int simba_tck_report_passed(const simba_tck_report_t* r) {
  if (!r || r->cases.empty()) return 0;
  for (const auto& c : r->cases) {
    if (!c.detail.empty()) return 0;
  }
  return 1;
}

size_t simba_tck_report_case_count(const simba_tck_report_t* r) { return r ? r->cases.size() : 0; }

const char* simba_tck_report_case_name(const simba_tck_report_t* r, size_t i) {
  return r && i < r->cases.size() ? r->cases[i].name.c_str() : nullptr;
}

int simba_tck_report_case_passed(const simba_tck_report_t* r, size_t i) {
  return r && i < r->cases.size() && r->cases[i].detail.empty() ? 1 : 0;
}

const char* simba_tck_report_case_detail(const simba_tck_report_t* r, size_t i) {
  return r && i < r->cases.size() ? r->cases[i].detail.c_str() : nullptr;
}

const char* simba_tck_report_text(const simba_tck_report_t* r) { return r ? r->text.c_str() : ""; }

void simba_tck_report_free(simba_tck_report_t* r) { delete r; }

}  // extern "C"
