// What a node counts for its operators, and how it reads in the Prometheus text
// exposition format (simba_client_metrics_text) and in the snapshot JSON. Pure:
// the node records, the engine renders a copy taken on the loop thread.
#ifndef SIMBA_CORE_METRICS_H
#define SIMBA_CORE_METRICS_H

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"

namespace simba {

// A cumulative histogram over fixed upper bounds, in seconds.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(Duration d);
  const std::vector<double>& bounds() const { return bounds_; }
  // counts()[i]: observations <= bounds()[i] (not cumulative); the last slot
  // holds those above every bound.
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum_seconds() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Indexed by RevokeReason (kNone unused).
using RevocationCounts = std::array<uint64_t, 6>;

struct NodeMetrics {
  uint64_t keep_alive_failures = 0;  // answered other than kOk, or timed out
  RevocationCounts revocations{};
  Histogram keep_alive_rtt;        // sent to answered, kOk answers
  Histogram remaining_at_renewal;  // local validity left when a kOk answer came
  Histogram handover;              // revocation to release answered (or session end)
  NodeMetrics();
};

// The gauges and counters the text reports besides NodeMetrics.
struct MetricsInput {
  std::string client;                     // the label client="..."
  const char* session_state = "OPENING";  // session_status_name()
  Duration session_remaining{0};
  uint64_t sessions_opened = 0, keep_alives = 0, acquires = 0, releases = 0, terms = 0;
  uint64_t leases_held = 0;
  const NodeMetrics* metrics = nullptr;
};

// Prometheus text exposition format 0.0.4.
std::string metrics_text(const MetricsInput& in);
// The same values as one JSON object (the snapshot's "metrics").
std::string metrics_json(const MetricsInput& in);

}  // namespace simba

#endif
