#include "core/metrics.h"

#include <cstdio>

#include "core/term_state.h"

namespace simba {

namespace {

const std::vector<double> kRoundTripBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kValidityBounds = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120};

// Label values escape backslash, double quote and newline.
std::string label_value(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

struct Writer {
  std::string out;
  std::string client;  // client="..." already escaped

  void head(const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    out += name + "{client=\"" + client + "\"" + (labels.empty() ? "" : "," + labels) + "} " +
           value + "\n";
  }
  void counter(const char* name, const char* help, uint64_t v) {
    head(name, "counter", help);
    sample(name, "", std::to_string(v));
  }
  void histogram(const char* name, const char* help, const Histogram& h) {
    head(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      sample(std::string(name) + "_bucket", "le=\"" + number(h.bounds()[i]) + "\"",
             std::to_string(cumulative));
    }
    sample(std::string(name) + "_bucket", "le=\"+Inf\"", std::to_string(h.count()));
    sample(std::string(name) + "_sum", "", number(h.sum_seconds()));
    sample(std::string(name) + "_count", "", std::to_string(h.count()));
  }
};

const RevokeReason kReasons[] = {RevokeReason::kStopped, RevokeReason::kSteppedDown,
                                 RevokeReason::kDeadlinePassed, RevokeReason::kSessionExpired,
                                 RevokeReason::kTakenOver};
const char* const kStates[] = {"OPENING", "LIVE", "SUSPENDED", "CLOSED"};

std::string histogram_json(const Histogram& h) {
  std::string s = "{\"count\":" + std::to_string(h.count()) +
                  ",\"sum_s\":" + number(h.sum_seconds()) + ",\"buckets\":[";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    s += std::string(i ? "," : "") + "[" + number(h.bounds()[i]) + "," +
         std::to_string(cumulative) + "]";
  }
  return s + "]}";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(Duration d) {
  const double s = std::chrono::duration<double>(d).count();
  size_t i = 0;
  while (i < bounds_.size() && s > bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += s;
}

NodeMetrics::NodeMetrics()
    : keep_alive_rtt(kRoundTripBounds),
      remaining_at_renewal(kValidityBounds),
      handover(kRoundTripBounds) {}

std::string metrics_text(const MetricsInput& in) {
  static const NodeMetrics kEmpty;
  const NodeMetrics& m = in.metrics ? *in.metrics : kEmpty;
  Writer w;
  w.client = label_value(in.client);
  w.counter("simba_sessions_opened_total", "Sessions this client opened.", in.sessions_opened);
  w.counter("simba_keep_alives_total", "Keep-alives sent.", in.keep_alives);
  w.counter("simba_keep_alive_failures_total",
            "Keep-alives answered with an error or not answered in time.", m.keep_alive_failures);
  w.counter("simba_acquires_total", "Acquire calls sent (elections and locks).", in.acquires);
  w.counter("simba_terms_total", "Terms won (leases adopted).", in.terms);
  w.counter("simba_releases_total", "Release calls sent.", in.releases);
  w.head("simba_revocations_total", "counter", "Terms revoked, by reason.");
  for (RevokeReason r : kReasons) {
    w.sample("simba_revocations_total", std::string("reason=\"") + revoke_reason_name(r) + "\"",
             std::to_string(m.revocations[static_cast<int>(r)]));
  }
  w.histogram("simba_keep_alive_rtt_seconds", "Keep-alive round trip, answered ones.",
              m.keep_alive_rtt);
  w.histogram("simba_session_remaining_at_renewal_seconds",
              "Local session validity left when a keep-alive answer came.", m.remaining_at_renewal);
  w.histogram("simba_handover_seconds",
              "From a term's revocation (stop, step-down) to its release answered.", m.handover);
  w.head("simba_session_state", "gauge", "1 for the session's current state.");
  for (const char* st : kStates) {
    w.sample("simba_session_state", std::string("state=\"") + st + "\"",
             std::string(in.session_state) == st ? "1" : "0");
  }
  w.head("simba_session_remaining_seconds", "gauge", "Local validity left of the session.");
  w.sample("simba_session_remaining_seconds", "",
           number(std::chrono::duration<double>(in.session_remaining).count()));
  w.head("simba_leases_held", "gauge", "Terms held now (elections and locks).");
  w.sample("simba_leases_held", "", std::to_string(in.leases_held));
  return w.out;
}

std::string metrics_json(const MetricsInput& in) {
  static const NodeMetrics kEmpty;
  const NodeMetrics& m = in.metrics ? *in.metrics : kEmpty;
  std::string s = "{\"keep_alive_failures\":" + std::to_string(m.keep_alive_failures) +
                  ",\"leases_held\":" + std::to_string(in.leases_held) + ",\"revocations\":{";
  bool first = true;
  for (RevokeReason r : kReasons) {
    s += std::string(first ? "" : ",") + "\"" + revoke_reason_name(r) +
         "\":" + std::to_string(m.revocations[static_cast<int>(r)]);
    first = false;
  }
  s += "},\"keep_alive_rtt\":" + histogram_json(m.keep_alive_rtt) +
       ",\"remaining_at_renewal\":" + histogram_json(m.remaining_at_renewal) +
       ",\"handover\":" + histogram_json(m.handover) + "}";
  return s;
}

}  // namespace simba
