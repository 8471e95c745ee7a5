// The live view's value type as JSON (local_session::async_describe).
#include <taskgroup/session_description.hpp>

#include <boost/json.hpp>

#include <string>

namespace taskgroup {

std::string_view to_string(run_phase p) noexcept { return p == run_phase::queued ? "queued" : "running"; }

std::string to_json(const session_description& d) {
  boost::json::object root;
  root["closed"] = d.closed;
  if (d.rank) root["rank"] = *d.rank;
  boost::json::array runs;
  for (const run_description& r : d.runs) {
    boost::json::array waiting;
    for (const std::string& line : r.waiting) waiting.emplace_back(line);
    runs.emplace_back(boost::json::object{{"trace_id", r.trace_id},
                                          {"group", r.group},
                                          {"phase", to_string(r.phase)},
                                          {"priority", r.priority},
                                          {"age_us", r.age.count()},
                                          {"waiting", std::move(waiting)}});
  }
  root["runs"] = std::move(runs);
  return boost::json::serialize(root);
}

}  // namespace taskgroup
