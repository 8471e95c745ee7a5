// taskgroup: errors.
//
// Every public operation that can fail returns `taskgroup::result<T>`, a
// Boost.Outcome result whose error is a `taskgroup::error`: an error_code of
// the `taskgroup` category (or of another category, such as Asio's, when the
// cause came from there) plus a message that names what failed: workspace,
// task, step path, net, op index and type, blob, expected and actual types.
//
// Threading: every type here is a value type; distinct objects may be used
// from distinct threads freely (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/result_error_code_throw_as_system_error.hpp>
#include <boost/outcome/try.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace taskgroup {

/// Error codes of the `taskgroup` category.
enum class errc {
  /// A blob name does not resolve in a workspace (or its parents).
  blob_not_found = 1,
  /// A typed access found a blob holding another type (or no value).
  type_mismatch,
  /// A blob exists but holds no value yet.
  blob_empty,
  /// A net name is unknown to a workspace or a plan.
  net_not_found,
  /// A net with this name already exists (and overwriting was not asked for).
  net_exists,
  /// Two different nets share one name inside one step tree or plan.
  duplicate_net,
  /// No operator of this type is registered.
  unknown_operator,
  /// An operator type is registered twice.
  duplicate_operator,
  /// An op has the wrong number of inputs or outputs.
  arity_mismatch,
  /// An op argument is missing, unknown, or of the wrong type or value.
  bad_argument,
  /// An operator failed while running (Fail, division by zero, ...).
  op_failed,
  /// An execution step is malformed (both nets and substeps, ...).
  invalid_step,
  /// A task, group or output is used against its rules.
  invalid_task,
  /// A task output was read before any run set it.
  output_not_set,
  /// An operation on a closed queue blob.
  queue_closed,
  /// The operation was cancelled from outside (or by a failing sibling).
  /// Equivalent to the condition `operation_canceled`.
  cancelled,
  /// A deadline expired. Equivalent to the condition `timed_out`.
  timeout,
  /// A plan file is malformed.
  invalid_plan,
  /// A value could not be converted (serialization, codecs).
  not_serializable,
  /// The session has been closed (or its execution context destroyed):
  /// it takes no new run. Equivalent to the condition
  /// `bad_file_descriptor`, which Asio's operations on a closed I/O object
  /// report.
  session_closed,
  /// A default-constructed result: no operation produced it.
  no_result,
  /// The ranks of an MPI job built different groups, or disagree on the
  /// run protocol.
  group_mismatch,
  /// An MPI call failed, or a rank stopped answering.
  mpi_failed,
  /// A run's feeds do not match the inputs its group declares (an unknown
  /// node or blob, a wrong type, a missing required input, a blob fed
  /// twice).
  invalid_feed,
  /// An op library cannot be loaded (missing file, not an op library,
  /// another ABI version, its registration failed).
  op_library_failed,
  /// The MPI session runs one group at a time and one is in flight: try
  /// again once it has ended. Equivalent to the condition
  /// `device_or_resource_busy`.
  session_busy,
  /// A local session's admission limits shed the run (session_limits): it
  /// found the queue full, was pushed out of it by a run of higher
  /// priority, or waited too long in it. Nothing of it ran. Equivalent to
  /// the condition `resource_unavailable_try_again`.
  overloaded,
};

/// The name of code `c` as written in C++ and in plan files (`op_failed`,
/// `timeout`); empty for a value that names no code. Reentrant.
TASKGROUP_API std::string_view name_of(errc c) noexcept;
/// The code named `name` (as `name_of` writes it), or none. Reentrant.
TASKGROUP_API std::optional<errc> errc_named(std::string_view name) noexcept;

/// The `taskgroup` error category (name "taskgroup"). Thread-safe.
///
/// Its codes compare equal to the standard conditions they stand for, so
/// that code written for any Asio operation reads them:
/// `errc::cancelled` to `operation_canceled`, `errc::timeout` to
/// `timed_out`, `errc::session_closed` to `bad_file_descriptor`,
/// `errc::session_busy` to `device_or_resource_busy`, `errc::overloaded`
/// to `resource_unavailable_try_again`. Both
/// `ec == boost::system::errc::operation_canceled` and
/// `ec == std::errc::operation_canceled` hold for a cancelled run. (Asio's
/// own `boost::asio::error::operation_aborted` is a code of another
/// category, not a condition: `ec == operation_aborted` does not hold;
/// compare with the condition instead.)
TASKGROUP_API const boost::system::error_category& error_category() noexcept;

/// Makes an error_code of the `taskgroup` category.
inline boost::system::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

/// An error: a code plus a message naming what failed.
///
/// The message is complete on its own (`what()`-ready); `code` lets callers
/// branch on the kind of failure (`err.code == errc::cancelled`).
struct TASKGROUP_API error {
  boost::system::error_code code;
  std::string message;

  error() = default;
  error(boost::system::error_code c, std::string m) : code(c), message(std::move(m)) {}
  error(errc e, std::string m) : code(make_error_code(e)), message(std::move(m)) {}

  /// Returns a copy whose message is `prefix + ": " + message`: how context
  /// (net, step path, task) is added as an error travels up.
  [[nodiscard]] error with_context(std::string_view prefix) const;

  /// True when the code is `errc::cancelled` or Asio's `operation_aborted`.
  [[nodiscard]] bool is_cancelled() const noexcept;
};

/// Exception thrown by `result<T>::value()` on an error, and by the
/// throwing conveniences (`op_context::input`, ...). `what()` is the message.
class TASKGROUP_API system_error : public boost::system::system_error {
 public:
  explicit system_error(const error& e) : boost::system::system_error(e.code, e.message), error_(e) {}
  [[nodiscard]] const taskgroup::error& error() const noexcept { return error_; }
  /// The error's message, as is.
  [[nodiscard]] const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  taskgroup::error error_;
};

/// Outcome hook: the error code of an error.
inline const boost::system::error_code& make_error_code(const error& e) noexcept { return e.code; }

/// Outcome hook: how `value()` on an errored result throws.
[[noreturn]] TASKGROUP_API void outcome_throw_as_system_error_with_payload(const error& e);

}  // namespace taskgroup

namespace boost {
namespace system {
template <>
struct is_error_code_enum<taskgroup::errc> : std::true_type {};
}  // namespace system
}  // namespace boost

BOOST_OUTCOME_V2_NAMESPACE_BEGIN
namespace trait {
template <>
struct is_error_type<taskgroup::error> {
  static constexpr bool value = true;
};
}  // namespace trait
BOOST_OUTCOME_V2_NAMESPACE_END

namespace taskgroup {

template <class T>
using basic_result_t = BOOST_OUTCOME_V2_NAMESPACE::basic_result<
    T, error, BOOST_OUTCOME_V2_NAMESPACE::policy::error_code_throw_as_system_error<T, error, void>>;

/// The result of every fallible public operation: a value or an `error`
/// (a Boost.Outcome result). `value()` on an error throws
/// `taskgroup::system_error`.
///
/// Unlike a plain Outcome result it is default-constructible, holding the
/// error `errc::no_result`, so that `asio::co_spawn` accepts awaitables of
/// it (co_spawn default-constructs the value on its exception path).
template <class T>
class result : public basic_result_t<T> {
  using base = basic_result_t<T>;

 public:
  using base::base;
  result() : base(error(errc::no_result, "no result")) {}
  result(const base& b) : base(b) {}        // NOLINT(google-explicit-constructor)
  result(base&& b) : base(std::move(b)) {}  // NOLINT(google-explicit-constructor)
};

/// The result of an operation that returns nothing: success or an error.
using status = result<void>;

/// A successful `status`.
inline status ok() noexcept { return BOOST_OUTCOME_V2_NAMESPACE::success(); }

/// Makes a failed result from a code and a message.
inline auto fail(errc e, std::string message) {
  return BOOST_OUTCOME_V2_NAMESPACE::failure(error(e, std::move(message)));
}
inline auto fail(error e) { return BOOST_OUTCOME_V2_NAMESPACE::failure(std::move(e)); }

/// Quotes a name for messages: `"x"`.
TASKGROUP_API std::string quote(std::string_view name);

}  // namespace taskgroup

/// Propagates the error of a taskgroup result out of the enclosing function.
#define TASKGROUP_TRY(...) BOOST_OUTCOME_TRY(__VA_ARGS__)
/// Same, out of the enclosing coroutine (`co_return`).
#define TASKGROUP_CO_TRY(...) BOOST_OUTCOME_CO_TRY(__VA_ARGS__)
