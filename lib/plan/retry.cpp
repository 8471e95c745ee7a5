// Retry policies in plans: the "retry" object of tasks and steps. The
// limits are the policy's own (`retry_policy::fault`), named here at the
// JSON pointer of the member they concern.
#include "plan/internal.hpp"

#include <climits>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

// The members of a "retry" object, in written order.
constexpr std::string_view retry_keys[] = {
    "max_attempts", "initial_backoff_ms", "multiplier", "max_backoff_ms", "jitter", "retry_on"};

// The policy's field that member `key` sets, as `retry_policy::fault`
// names it: the key without its unit.
std::string_view field_of(std::string_view key) { return key.ends_with("_ms") ? key.substr(0, key.size() - 3) : key; }

result<int> attempts(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto n, get_integer(v, ptr));
  if (n < INT_MIN || n > INT_MAX) {
    // Past what the policy's int holds: refused as the policy refuses any
    // count outside its range, with the value as written.
    return bad(ptr, "max_attempts must be in [1, " + std::to_string(retry_policy::max_attempts_limit) + "], got " +
                        std::to_string(n));
  }
  return static_cast<int>(n);
}

result<std::vector<errc>> codes(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto arr, get_array(v, ptr));
  std::vector<errc> out;
  out.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const pointer at = child(ptr, i);
    TASKGROUP_TRY(auto name, get_string((*arr)[i], at));
    const auto c = errc_named(name);
    if (!c) return bad(at, quote(name) + " names no error code (taskgroup::errc, e.g. \"op_failed\")");
    // A code that is never retried: the policy's own words for it.
    retry_policy one;
    one.retry_on = {*c};
    if (auto f = one.fault(); !f.empty()) return bad(at, f);
    out.push_back(*c);
  }
  return out;
}

}  // namespace

result<retry_policy> read_retry(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto o, get_object(v, ptr));
  TASKGROUP_TRY(known_keys(*o, ptr, retry_keys));
  retry_policy p;
  if (const auto* x = o->if_contains("max_attempts")) {
    TASKGROUP_TRY(p.max_attempts, attempts(*x, child(ptr, "max_attempts")));
  }
  if (const auto* x = o->if_contains("initial_backoff_ms")) {
    TASKGROUP_TRY(auto ms, get_integer(*x, child(ptr, "initial_backoff_ms")));
    p.initial_backoff = std::chrono::milliseconds(ms);
  }
  if (const auto* x = o->if_contains("multiplier")) {
    TASKGROUP_TRY(p.multiplier, get_number(*x, child(ptr, "multiplier")));
  }
  if (const auto* x = o->if_contains("max_backoff_ms")) {
    TASKGROUP_TRY(auto ms, get_integer(*x, child(ptr, "max_backoff_ms")));
    p.max_backoff = std::chrono::milliseconds(ms);
  }
  if (const auto* x = o->if_contains("jitter")) {
    TASKGROUP_TRY(p.jitter, get_bool(*x, child(ptr, "jitter")));
  }
  if (const auto* x = o->if_contains("retry_on")) {
    TASKGROUP_TRY(p.retry_on, codes(*x, child(ptr, "retry_on")));
  }
  // The policy's limits, checked by the policy: its fault names a field
  // first, and the error points at that field's member when the object
  // holds it (else at the object: a limit between fields, say).
  if (std::string f = p.fault(); !f.empty()) {
    for (const std::string_view k : retry_keys) {
      if (f.starts_with(std::string(field_of(k)) + " ") && o->contains(k)) return bad(child(ptr, k), f);
    }
    return bad(ptr, f);
  }
  return p;
}

bool writes_retry(const retry_policy& p) { return p != retry_policy{}; }

json::value retry_json(const retry_policy& p) {
  json::array on;
  for (const errc c : p.retry_on) on.emplace_back(json::string(name_of(c)));
  json::object o;
  o["max_attempts"] = p.max_attempts;
  o["initial_backoff_ms"] = p.initial_backoff.count();
  o["multiplier"] = p.multiplier;
  o["max_backoff_ms"] = p.max_backoff.count();
  o["jitter"] = p.jitter;
  o["retry_on"] = std::move(on);
  return json::value(std::move(o));
}

}  // namespace taskgroup::plan_detail
