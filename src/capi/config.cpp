#include <cmath>

#include "capi/capi.h"

using simba::capi::fail;
using simba::capi::guarded;

extern "C" {

int simba_config_new(simba_config_t** out) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_config_new: out is NULL");
    *out = new simba_config();
    return SIMBA_OK;
  });
}

int simba_config_copy(simba_config_t** out, const simba_config_t* c) {
  return guarded([&]() -> int {
    if (!out || !c) return fail(SIMBA_EINVAL, "simba_config_copy: NULL argument");
    *out = new simba_config(*c);
    return SIMBA_OK;
  });
}

void simba_config_free(simba_config_t* c) { delete c; }

int simba_config_set(simba_config_t* c, const char* key, const char* value) {
  return guarded([&]() -> int {
    if (!c || !key || !value) return fail(SIMBA_EINVAL, "simba_config_set: NULL argument");
    const std::string why = c->cfg.set(key, value);
    if (!why.empty()) return fail(SIMBA_EINVAL, why);
    if (key == simba::kConfigKeyExecutor) c->hooks.submit = nullptr;  // text replaces host
    return SIMBA_OK;
  });
}

int simba_config_set_ms(simba_config_t* c, const char* key, int64_t ms) {
  return guarded([&]() -> int {
    if (!c || !key) return fail(SIMBA_EINVAL, "simba_config_set_ms: NULL argument");
    if (ms < 0) return fail(SIMBA_EINVAL, std::string(key) + ": a duration cannot be negative");
    if (ms > simba::kMaxDurationMs) {
      return fail(SIMBA_EINVAL, std::string(key) + ": duration too large");
    }
    const std::string why = c->cfg.set_duration(key, simba::ms(ms));
    if (!why.empty()) return fail(SIMBA_EINVAL, why);
    return SIMBA_OK;
  });
}

int simba_config_get_ms(const simba_config_t* c, const char* key, int64_t* out_ms) {
  return guarded([&]() -> int {
    if (!c || !key || !out_ms) return fail(SIMBA_EINVAL, "simba_config_get_ms: NULL argument");
    const auto d = c->cfg.get_duration(key);
    if (!d) return fail(SIMBA_EINVAL, std::string(key) + " is not a duration key");
    *out_ms = simba::to_ms(*d);
    return SIMBA_OK;
  });
}

int simba_config_get_double(const simba_config_t* c, const char* key, double* out) {
  return guarded([&]() -> int {
    if (!c || !key || !out) return fail(SIMBA_EINVAL, "simba_config_get_double: NULL argument");
    const auto v = c->cfg.get_number(key);
    if (!v) return fail(SIMBA_EINVAL, std::string(key) + " is not a numeric key");
    *out = *v;
    return SIMBA_OK;
  });
}

int simba_config_set_executor(simba_config_t* c, simba_submit_fn submit, void* ctx) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_config_set_executor: config is NULL");
    c->hooks.submit = submit;
    c->hooks.submit_ctx = submit ? ctx : nullptr;
    c->cfg.executor = submit ? simba::ExecutorKind::kHost : simba::ExecutorKind::kPool;
    return SIMBA_OK;
  });
}

int simba_config_set_logger(simba_config_t* c, simba_log_fn log, void* ud, int min_level) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_config_set_logger: config is NULL");
    if (min_level < SIMBA_LOG_DEBUG || min_level > SIMBA_LOG_ERROR) {
      return fail(SIMBA_EINVAL,
                  "simba_config_set_logger: min_level must be SIMBA_LOG_DEBUG..ERROR");
    }
    if (log) {
      c->hooks.log = [log, ud](int level, const std::string& line) {
        log(ud, level, line.c_str());
      };
    } else {
      c->hooks.log = nullptr;
    }
    c->hooks.log_min_level = min_level;
    return SIMBA_OK;
  });
}

int simba_config_set_event_sink(simba_config_t* c, simba_event_fn fn, void* ud) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_config_set_event_sink: config is NULL");
    if (fn) {
      c->hooks.events = [fn, ud](simba::SessionEvent ev, const std::string& detail) {
        fn(ud, static_cast<simba_event_type_t>(ev), detail.c_str());
      };
    } else {
      c->hooks.events = nullptr;
    }
    return SIMBA_OK;
  });
}

int simba_config_validate(const simba_config_t* c) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_config_validate: config is NULL");
    const std::string why = c->cfg.validate();
    if (!why.empty()) return fail(SIMBA_EINVAL, why);
    return SIMBA_OK;
  });
}

}  // extern "C"
