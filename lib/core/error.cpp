#include <taskgroup/error.hpp>

#include <boost/asio/error.hpp>

namespace taskgroup {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "taskgroup"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::blob_not_found: return "blob not found";
      case errc::type_mismatch: return "type mismatch";
      case errc::blob_empty: return "blob has no value";
      case errc::net_not_found: return "net not found";
      case errc::net_exists: return "net already exists";
      case errc::duplicate_net: return "different nets with the same name";
      case errc::unknown_operator: return "unknown operator type";
      case errc::duplicate_operator: return "operator type already registered";
      case errc::arity_mismatch: return "wrong number of inputs or outputs";
      case errc::bad_argument: return "bad operator argument";
      case errc::op_failed: return "operator failed";
      case errc::invalid_step: return "invalid execution step";
      case errc::invalid_task: return "invalid task or task group";
      case errc::output_not_set: return "output value not set yet";
      case errc::queue_closed: return "queue closed";
      case errc::cancelled: return "cancelled";
      case errc::timeout: return "timed out";
      case errc::invalid_plan: return "invalid plan";
      case errc::not_serializable: return "not serializable";
      case errc::session_closed: return "session is closed";
      case errc::no_result: return "no result";
      case errc::group_mismatch: return "ranks built different groups";
      case errc::mpi_failed: return "MPI failed";
      case errc::invalid_feed: return "invalid feed";
      case errc::op_library_failed: return "op library cannot be loaded";
      case errc::session_busy: return "a run is already in flight on the session";
      case errc::overloaded: return "session overloaded";
    }
    return "unknown taskgroup error";
  }
  // The standard condition each code stands for, if any: what
  // `ec == condition` compares through.
  boost::system::error_condition default_error_condition(int ev) const noexcept override {
    namespace generic = boost::system::errc;
    switch (static_cast<errc>(ev)) {
      case errc::cancelled: return generic::make_error_condition(generic::operation_canceled);
      case errc::timeout: return generic::make_error_condition(generic::timed_out);
      case errc::session_closed: return generic::make_error_condition(generic::bad_file_descriptor);
      case errc::session_busy: return generic::make_error_condition(generic::device_or_resource_busy);
      case errc::overloaded: return generic::make_error_condition(generic::resource_unavailable_try_again);
      default: return {ev, *this};
    }
  }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

error error::with_context(std::string_view prefix) const {
  std::string m;
  m.reserve(prefix.size() + 2 + message.size());
  m.append(prefix).append(": ").append(message);
  return {code, std::move(m)};
}

bool error::is_cancelled() const noexcept {
  return code == errc::cancelled || code == boost::asio::error::operation_aborted;
}

void outcome_throw_as_system_error_with_payload(const error& e) { throw system_error(e); }

std::string quote(std::string_view name) {
  // Control characters (U+0000 to U+001F, U+007F) as \u00XX: a message
  // never ends a line, stops at a NUL or sends a terminal a control
  // sequence because of a name in it.
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string s;
  s.reserve(name.size() + 2);
  s.push_back('"');
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      s += "\\u00";
      s.push_back(hex[u >> 4]);
      s.push_back(hex[u & 15]);
    } else {
      s.push_back(c);
    }
  }
  s.push_back('"');
  return s;
}

std::string_view name_of(errc c) noexcept {
  switch (c) {
    case errc::blob_not_found: return "blob_not_found";
    case errc::type_mismatch: return "type_mismatch";
    case errc::blob_empty: return "blob_empty";
    case errc::net_not_found: return "net_not_found";
    case errc::net_exists: return "net_exists";
    case errc::duplicate_net: return "duplicate_net";
    case errc::unknown_operator: return "unknown_operator";
    case errc::duplicate_operator: return "duplicate_operator";
    case errc::arity_mismatch: return "arity_mismatch";
    case errc::bad_argument: return "bad_argument";
    case errc::op_failed: return "op_failed";
    case errc::invalid_step: return "invalid_step";
    case errc::invalid_task: return "invalid_task";
    case errc::output_not_set: return "output_not_set";
    case errc::queue_closed: return "queue_closed";
    case errc::cancelled: return "cancelled";
    case errc::timeout: return "timeout";
    case errc::invalid_plan: return "invalid_plan";
    case errc::not_serializable: return "not_serializable";
    case errc::session_closed: return "session_closed";
    case errc::no_result: return "no_result";
    case errc::group_mismatch: return "group_mismatch";
    case errc::mpi_failed: return "mpi_failed";
    case errc::invalid_feed: return "invalid_feed";
    case errc::op_library_failed: return "op_library_failed";
    case errc::session_busy: return "session_busy";
    case errc::overloaded: return "overloaded";
  }
  return {};
}

std::optional<errc> errc_named(std::string_view name) noexcept {
  // The codes are numbered from 1 without gaps (errc's first is 1).
  for (int v = 1; v <= static_cast<int>(errc::overloaded); ++v) {
    if (name_of(static_cast<errc>(v)) == name) return static_cast<errc>(v);
  }
  return std::nullopt;
}

}  // namespace taskgroup
