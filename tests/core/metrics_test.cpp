// The metrics text and JSON: what a scraper parses.
#include "core/metrics.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "core/term_state.h"

namespace simba {
namespace {

// The value of the one sample line that starts with `series` (name and labels).
std::string sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line, found;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      found = line.substr(series.size() + 1);
      ++n;
    }
  }
  EXPECT_EQ(n, 1) << series << " in\n" << text;
  return found;
}

TEST(Metrics, HistogramCountsEachObservationOnceInTheFirstBucketThatHoldsIt) {
  Histogram h({0.001, 0.01, 0.1});
  h.observe(ms(0));
  h.observe(std::chrono::microseconds(1000));  // on the bound: that bucket (le is inclusive)
  h.observe(ms(5));
  h.observe(ms(500));
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{2, 1, 0, 1}));
  EXPECT_NEAR(h.sum_seconds(), 0.506, 1e-9);
}

TEST(Metrics, TextHasTypesLabelsCumulativeBucketsAndEveryReasonAndState) {
  NodeMetrics m;
  m.keep_alive_failures = 2;
  m.revocations[static_cast<int>(RevokeReason::kStopped)] = 3;
  m.revocations[static_cast<int>(RevokeReason::kTakenOver)] = 1;
  m.keep_alive_rtt.observe(std::chrono::microseconds(300));
  m.keep_alive_rtt.observe(ms(2));
  m.handover.observe(ms(4));
  MetricsInput in;
  in.client = "web \"1\"\\\n";
  in.session_state = "LIVE";
  in.session_remaining = ms(14500);
  in.keep_alives = 10;
  in.terms = 4;
  in.leases_held = 1;
  in.metrics = &m;
  const std::string t = metrics_text(in);
  const std::string c = "client=\"web \\\"1\\\"\\\\\\n\"";
  EXPECT_NE(t.find("# TYPE simba_keep_alives_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE simba_keep_alive_rtt_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE simba_session_state gauge\n"), std::string::npos);
  EXPECT_EQ(sample(t, "simba_keep_alives_total{" + c + "}"), "10");
  EXPECT_EQ(sample(t, "simba_keep_alive_failures_total{" + c + "}"), "2");
  EXPECT_EQ(sample(t, "simba_terms_total{" + c + "}"), "4");
  EXPECT_EQ(sample(t, "simba_revocations_total{" + c + ",reason=\"STOPPED\"}"), "3");
  EXPECT_EQ(sample(t, "simba_revocations_total{" + c + ",reason=\"TAKEN_OVER\"}"), "1");
  EXPECT_EQ(sample(t, "simba_revocations_total{" + c + ",reason=\"DEADLINE_PASSED\"}"), "0");
  EXPECT_EQ(sample(t, "simba_keep_alive_rtt_seconds_bucket{" + c + ",le=\"0.0005\"}"), "1");
  EXPECT_EQ(sample(t, "simba_keep_alive_rtt_seconds_bucket{" + c + ",le=\"0.0025\"}"), "2");
  EXPECT_EQ(sample(t, "simba_keep_alive_rtt_seconds_bucket{" + c + ",le=\"+Inf\"}"), "2");
  EXPECT_EQ(sample(t, "simba_keep_alive_rtt_seconds_count{" + c + "}"), "2");
  EXPECT_EQ(sample(t, "simba_keep_alive_rtt_seconds_sum{" + c + "}"), "0.0023");
  EXPECT_EQ(sample(t, "simba_handover_seconds_count{" + c + "}"), "1");
  EXPECT_EQ(sample(t, "simba_session_state{" + c + ",state=\"LIVE\"}"), "1");
  EXPECT_EQ(sample(t, "simba_session_state{" + c + ",state=\"SUSPENDED\"}"), "0");
  EXPECT_EQ(sample(t, "simba_session_remaining_seconds{" + c + "}"), "14.5");
  EXPECT_EQ(sample(t, "simba_leases_held{" + c + "}"), "1");
  // Every line is a comment or "series value", and the text ends with a newline.
  std::istringstream lines(t);
  std::string line;
  while (std::getline(lines, line)) {
    ASSERT_FALSE(line.empty());
    if (line[0] == '#') continue;
    EXPECT_NE(line.find("} "), std::string::npos) << line;
  }
  EXPECT_EQ(t.back(), '\n');
}

TEST(Metrics, JsonCarriesTheSameValues) {
  NodeMetrics m;
  m.keep_alive_failures = 5;
  m.revocations[static_cast<int>(RevokeReason::kSessionExpired)] = 2;
  m.keep_alive_rtt.observe(ms(1));
  MetricsInput in;
  in.leases_held = 3;
  in.metrics = &m;
  const std::string j = metrics_json(in);
  EXPECT_NE(j.find("\"keep_alive_failures\":5"), std::string::npos) << j;
  EXPECT_NE(j.find("\"leases_held\":3"), std::string::npos) << j;
  EXPECT_NE(j.find("\"SESSION_EXPIRED\":2"), std::string::npos) << j;
  EXPECT_NE(j.find("\"keep_alive_rtt\":{\"count\":1,\"sum_s\":0.001"), std::string::npos) << j;
}

}  // namespace
}  // namespace simba
