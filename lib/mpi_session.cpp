#include <taskgroup/mpi_session.hpp>

#include "detail/join.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

// GCC 12 flags the coroutine ramps of this file, inlined into their
// caller, with a false -Wmismatched-new-delete: Asio's frame operator new
// (aligned_alloc through its recycling allocator) and its matching delete.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace taskgroup {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

// ---- the environment ---------------------------------------------------------

namespace {

int init_mpi(int* argc, char*** argv, bool& owner) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    owner = true;
  } else {
    MPI_Query_thread(&provided);
  }
  return provided;
}

}  // namespace

mpi_environment::mpi_environment() { provided_ = init_mpi(nullptr, nullptr, owner_); }
mpi_environment::mpi_environment(int& argc, char**& argv) { provided_ = init_mpi(&argc, &argv, owner_); }

mpi_environment::~mpi_environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owner_ && finalized == 0) MPI_Finalize();
}

int mpi_environment::rank() const noexcept {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_environment::size() const noexcept {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

bool mpi_environment::launched_by_mpi() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v) != nullptr) return true;  // NOLINT(concurrency-mt-unsafe): read-only use
  }
  return false;
}

// ---- wire helpers --------------------------------------------------------------

namespace {

constexpr int tag_start = 7101;
constexpr int tag_status = 7102;
constexpr int tag_ctrl = 7103;

std::string mpi_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return std::string(buf, static_cast<std::size_t>(len));
}

status check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return ok();
  return fail(errc::mpi_failed, std::string(what) + ": " + mpi_text(rc));
}

void write_error(byte_writer& w, const error& e) {
  w.string(e.code.category().name());
  w.i64(e.code.value());
  w.string(e.message);
}

// Reads what write_error wrote into `out`.
status read_error(byte_reader& r, error& out) {
  TASKGROUP_TRY(auto category, r.string());
  TASKGROUP_TRY(auto value, r.i64());
  TASKGROUP_TRY(auto message, r.string());
  const int v = static_cast<int>(value);
  if (category == error_category().name()) {
    out = error(boost::system::error_code(v, error_category()), message);
  } else if (category == boost::system::system_category().name()) {
    out = error(boost::system::error_code(v, boost::system::system_category()), message);
  } else if (category == boost::system::generic_category().name()) {
    out = error(boost::system::error_code(v, boost::system::generic_category()), message);
  } else {
    out = error(errc::op_failed, message + " (" + category + " error " + std::to_string(v) + ")");
  }
  return ok();
}

std::int64_t to_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_ns(std::int64_t ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
}

// The group as every rank must see it, one line per fact.
std::vector<std::string> describe(const task_group& g, const std::map<std::string, int>& where, int size) {
  std::vector<std::string> lines;
  lines.push_back("ranks " + std::to_string(size));
  for (const auto& n : g.used_nodes()) lines.push_back("node " + quote(n) + " on rank " + std::to_string(where.at(n)));
  for (const auto& t : g.tasks()) {
    std::string line = "task " + quote(t.name()) + " on node " + quote(t.node_name()) + ", outputs [";
    bool first = true;
    for (const auto& out : t.output_states()) {
      for (const auto& b : out->blobs) {
        line += (first ? "" : ", ") + quote(b);
        first = false;
      }
      if (out->type != nullptr) line += ": " + detail::demangle(out->type->name());
    }
    lines.push_back(line + "]");
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    out.emplace_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return out;
}

// Names the first difference between rank 0's description and this rank's.
error group_mismatch(int rank, const std::vector<std::string>& client, const std::vector<std::string>& mine) {
  const std::size_t n = std::max(client.size(), mine.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::string a = i < client.size() ? client[i] : "(nothing)";
    const std::string b = i < mine.size() ? mine[i] : "(nothing)";
    if (a != b) {
      return {errc::group_mismatch,
              "built a different group: rank 0 has " + a + ", rank " + std::to_string(rank) + " has " + b};
    }
  }
  return {errc::group_mismatch, "built a different group"};
}

// The storage of values received apart from their STATUS (see below)
// whose last holder let them go, one per codec tag, for the next value
// received: a caller that keeps each run's report until the next run ends
// would otherwise have rank 0 allocate, and fault in, every large value.
// Deleters run on any thread, hence the lock.
class value_recycler {
 public:
  // Keeps `b` as the spare of `tag`, freeing the one it replaces.
  void give(const std::string& tag, std::unique_ptr<blob> b) noexcept {
    std::unique_ptr<blob> replaced;
    std::lock_guard lock(m_);
    for (auto& [t, spare] : spares_) {
      if (t == tag) {
        replaced = std::exchange(spare, std::move(b));
        return;
      }
    }
    try {
      spares_.emplace_back(tag, std::move(b));
    } catch (...) {  // b is freed with the failed element
    }
  }
  // The spare of `tag`, if any.
  std::unique_ptr<blob> take(const std::string& tag) noexcept {
    std::lock_guard lock(m_);
    for (auto& [t, spare] : spares_) {
      if (t == tag) return std::move(spare);
    }
    return nullptr;
  }

 private:
  std::mutex m_;
  std::vector<std::pair<std::string, std::unique_ptr<blob>>> spares_;
};

// Values received apart from their STATUS are made by rank 0 as mutable
// blobs with this deleter: the next run may receive into one again, or
// into its storage once nothing holds it (value_recycler).
struct received_value {
  std::weak_ptr<value_recycler> recycler;
  std::string tag;
  void operator()(const blob* b) const noexcept {
    std::unique_ptr<blob> owned(const_cast<blob*>(b));  // NOLINT: made mutable, see receive_detached
    if (auto r = recycler.lock()) r->give(tag, std::move(owned));
  }
};

// What a rank said: nothing wrong, or its error.
struct verdict {
  std::optional<error> e;
  // On a DONE: every task's status and failure, in group order.
  std::vector<std::pair<task_status, std::optional<error>>> tasks;
};

// A nonblocking send whose buffer lives until it completes.
struct pending_send {
  std::shared_ptr<const void> keep;  // owns the bytes being sent
  MPI_Request request = MPI_REQUEST_NULL;
};

// Output values at least this large travel as messages of their own,
// straight from and into their storage, when their codec allows it.
constexpr std::size_t detach_threshold = 32 * 1024;
constexpr int tag_payload = 7104;

// A value sent apart from its STATUS message.
struct detached {
  std::shared_ptr<const blob> keep;
  std::string_view bytes;
};

}  // namespace

// ---- the session ---------------------------------------------------------------

struct mpi_session::impl {
  impl(local_session& l, mpi_options o, bool threaded) : local(&l), options(std::move(o)) { setup(threaded); }

  void setup(bool threaded) {
    if (options.codecs == nullptr) options.codecs = &codec_registry::global();
    if (options.poll_min.count() <= 0) options.poll_min = std::chrono::microseconds(1);
    options.poll_max = std::max(options.poll_max, options.poll_min);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) {
      init_error = error(errc::mpi_failed, "MPI is not initialized (construct a taskgroup::mpi_environment first)");
      return;
    }
    MPI_Query_thread(&thread_level);
    if (threaded && thread_level < MPI_THREAD_SERIALIZED) {
      init_error = error(errc::mpi_failed, "MPI provides too low a thread level for a session with several threads");
      return;
    }
    if (auto e = wrong_thread("the session is constructed")) {
      init_error = std::move(e);
      return;
    }
    if (auto st = check_mpi(MPI_Comm_dup(options.comm, &comm), "MPI_Comm_dup"); !st) {
      init_error = st.error();
      return;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }

  // Below MPI_THREAD_SERIALIZED only the thread that initialized MPI may
  // call it: the error for `what` happening on another thread, if so.
  [[nodiscard]] std::optional<error> wrong_thread(const char* what) const {
    if (thread_level >= MPI_THREAD_SERIALIZED) return std::nullopt;
    int is_main = 0;
    MPI_Is_thread_main(&is_main);
    if (is_main != 0) return std::nullopt;
    return error(errc::mpi_failed,
                 std::string(what) + " on a thread other than the one that initialized MPI, and MPI provides only " +
                     (thread_level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED" : "MPI_THREAD_SINGLE") +
                     ": initialize MPI with MPI_THREAD_SERIALIZED (taskgroup::mpi_environment does), or make the "
                     "session's MPI calls on that thread");
  }

  ~impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&comm);
  }

  // Owned by the mpi_session, which outlives every run (see its destructor).
  local_session* local;
  mpi_options options;
  asio::strand<asio::any_io_executor> strand{local->get_executor()};
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int thread_level = MPI_THREAD_SINGLE;
  std::optional<error> init_error;
  // One run at a time, on the strand (run, async_run) or on the thread
  // blocked in run_blocking: what follows belongs to the run that set it.
  std::atomic<bool> running{false};
  std::uint64_t runs = 0;

  // run_blocking's event loop, kept from run to run (a new one would make
  // its reactor again each time); one blocking caller at a time.
  std::mutex blocking_mutex;
  std::optional<asio::io_context> blocking_loop;

  // Rank 0: storage of large received values, for the next ones.
  std::shared_ptr<value_recycler> recycler = std::make_shared<value_recycler>();

  // A group's placement and its description for START (one line per fact
  // every rank must agree on, and the lines joined).
  struct description {
    const void* group = nullptr;  // the group's state, while `alive` holds
    std::weak_ptr<const void> alive;
    std::map<std::string, int> where;
    std::vector<std::string> lines;
    std::string text;
  };
  // The last used group described: a used group can no longer change, so
  // its next runs skip placing and describing it again.
  std::shared_ptr<const description> described;

  result<std::map<std::string, int>> place(const task_group& g) const {
    for (const auto& [node, r] : options.placement) {
      if (r < 0 || r >= size) {
        return fail(errc::invalid_task, "mpi_options::placement puts node " + quote(node) + " on rank " +
                                            std::to_string(r) + ", outside a job of " + std::to_string(size) +
                                            " ranks");
      }
    }
    std::map<std::string, int> out;
    int i = 0;
    for (const auto& n : g.used_nodes()) {
      auto it = options.placement.find(n);
      out[n] = it != options.placement.end() ? it->second : i % size;
      ++i;
    }
    return out;
  }
};

namespace {

using impl_ptr = std::shared_ptr<mpi_session::impl>;

// The placement and description of `g`, kept on the session for its next
// runs once the group is used.
result<std::shared_ptr<const mpi_session::impl::description>> describe_group(mpi_session::impl& s,
                                                                             const task_group& g) {
  if (s.described && s.described->group == g.state().get() && !s.described->alive.expired()) return s.described;
  TASKGROUP_TRY(auto where, s.place(g));
  auto d = std::make_shared<mpi_session::impl::description>();
  d->group = g.state().get();
  d->alive = g.state();
  d->lines = describe(g, where, s.size);
  d->text = join_lines(d->lines);
  d->where = std::move(where);
  if (g.used()) s.described = d;
  return std::shared_ptr<const mpi_session::impl::description>(std::move(d));
}

// What one run shares with the completion handler of its local part.
struct run_ctx {
  explicit run_ctx(const asio::any_io_executor& ex) : wake(ex) {}
  asio::steady_timer wake;
  asio::cancellation_signal local_cancel;
  bool local_done = false;
  result<run_report> local;
  std::vector<pending_send> sends;
  std::optional<error> mpi_error;  // MPI itself failed: stop talking, unwind
};

// Starts this rank's nodes on the local session; completion wakes the loop.
void start_local(const impl_ptr& s, const std::shared_ptr<run_ctx>& ctx, const task_group& group,
                 const std::map<std::string, int>& where, run_options options) {
  std::vector<std::string> mine;
  for (const auto& [node, r] : where) {
    if (r == s->rank) mine.push_back(node);
  }
  options.only_nodes = std::move(mine);
  // Rank 0's own outputs go through the codecs as if they travelled, so a
  // group fails the same way wherever its nodes are placed; the others'
  // are encoded for real when sent.
  options.strict_codecs = s->rank == 0 ? s->options.codecs : nullptr;
  options.timeout.reset();  // the deadline is rank 0's
  auto done = [ctx](result<run_report> r) {
    ctx->local = std::move(r);
    ctx->local_done = true;
    ctx->wake.cancel();
  };
  s->local->async_run(
      group,
      asio::bind_cancellation_slot(ctx->local_cancel.slot(), asio::bind_executor(ctx->wake.get_executor(), done)),
      options);
}

void cancel_local(run_ctx& ctx) {
  if (!ctx.local_done) ctx.local_cancel.emit(asio::cancellation_type::terminal);
}

void send_bytes(const impl_ptr& s, run_ctx& ctx, int dest, int tag, std::string_view bytes,
                std::shared_ptr<const void> keep) {
  if (ctx.mpi_error) return;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    ctx.mpi_error = error(errc::mpi_failed, "a message of " + std::to_string(bytes.size()) + " bytes to rank " +
                                                std::to_string(dest) + " exceeds what one MPI message can carry");
    return;
  }
  pending_send p;
  p.keep = std::move(keep);
  const int rc = MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag, s->comm, &p.request);
  if (auto st = check_mpi(rc, "MPI_Isend"); !st) {
    ctx.mpi_error = st.error();
    return;
  }
  ctx.sends.push_back(std::move(p));
}

void send(const impl_ptr& s, run_ctx& ctx, int dest, int tag, std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  const std::string_view view(*owned);
  send_bytes(s, ctx, dest, tag, view, std::move(owned));
}

// Completes finished sends; true when any did.
bool progress_sends(run_ctx& ctx) {
  bool progressed = false;
  for (auto it = ctx.sends.begin(); it != ctx.sends.end();) {
    int flag = 0;
    if (auto st = check_mpi(MPI_Test(&it->request, &flag, MPI_STATUS_IGNORE), "MPI_Test"); !st) {
      ctx.mpi_error = st.error();
      return progressed;
    }
    if (flag != 0) {
      it = ctx.sends.erase(it);
      progressed = true;
    } else {
      ++it;
    }
  }
  return progressed;
}

// Receives a message of `tag` from `source` if one has arrived.
bool try_receive(const impl_ptr& s, run_ctx& ctx, int source, int tag, std::string& out, int& from) {
  if (ctx.mpi_error) return false;
  int flag = 0;
  MPI_Message msg = MPI_MESSAGE_NULL;
  MPI_Status probe;
  if (auto st = check_mpi(MPI_Improbe(source, tag, s->comm, &flag, &msg, &probe), "MPI_Improbe"); !st) {
    ctx.mpi_error = st.error();
    return false;
  }
  if (flag == 0) return false;
  int count = 0;
  MPI_Get_count(&probe, MPI_BYTE, &count);
  out.assign(static_cast<std::size_t>(count), '\0');
  // The message is matched and under way: receiving it only waits for
  // the bytes themselves.
  if (auto st = check_mpi(MPI_Mrecv(out.data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "MPI_Mrecv"); !st) {
    ctx.mpi_error = st.error();
    return false;
  }
  from = probe.MPI_SOURCE;
  return true;
}

// Sleeps until the next poll (or until woken by the local run ending).
asio::awaitable<void> nap(run_ctx& ctx, std::chrono::microseconds interval,
                          std::optional<clock_type::time_point> until) {
  auto wait = std::chrono::duration_cast<clock_type::duration>(interval);
  if (until) wait = std::min(wait, std::max(clock_type::duration::zero(), *until - clock_type::now()));
  ctx.wake.expires_after(wait);
  (void)co_await ctx.wake.async_wait(asio::as_tuple(asio::use_awaitable));
}

// Paces a polling loop: right after any progress it only yields to other
// work on the executor between polls (for `poll_spin`), so that a short
// exchange takes microseconds; then it sleeps, from `poll_min` doubling to
// `poll_max`, so that a waiting rank stays idle.
class pacer {
 public:
  explicit pacer(const mpi_options& o) : o_(o), interval_(o.poll_min), last_(clock_type::now()) {}

  asio::awaitable<void> wait(run_ctx& ctx, bool progressed, std::optional<clock_type::time_point> until) {
    const auto now = clock_type::now();
    if (progressed) {
      last_ = now;
      interval_ = o_.poll_min;
    }
    if (now - last_ < o_.poll_spin) {
      co_await asio::defer(ctx.wake.get_executor(), asio::use_awaitable);
      co_return;
    }
    co_await nap(ctx, interval_, until);
    interval_ = std::min(interval_ * 2, o_.poll_max);
  }

 private:
  const mpi_options& o_;
  std::chrono::microseconds interval_;
  clock_type::time_point last_;
};

[[noreturn, gnu::noinline, gnu::cold]] void abort_job(const impl_ptr& s, const std::string& why) {
  std::fprintf(stderr, "taskgroup: rank %d: %s; aborting the MPI job\n", s->rank, why.c_str());
  std::fflush(stderr);
  MPI_Abort(s->comm, 1);
  std::abort();  // MPI_Abort does not return; this is for the compiler
}

bool outside_cancelled(const asio::cancellation_state& cs) { return cs.cancelled() != asio::cancellation_type::none; }

// ---- STATUS: a rank's tasks, or its error -----------------------------------

// A STATUS message and the values that follow it as messages of their own.
struct status_message {
  std::string bytes;
  std::vector<detached> payloads;
};

status_message encode_status(const impl_ptr& s, std::uint64_t run_id, const result<run_report>& local) {
  status_message m;
  std::string& bytes = m.bytes;
  byte_writer w(bytes);
  w.u64(run_id);
  auto write_failure = [&](const error& e) {
    bytes.resize(8);  // keep the run id only
    m.payloads.clear();
    w.u8(1);
    write_error(w, e);
  };
  if (!local) {
    write_failure(local.error());
    return m;
  }
  w.u8(0);
  const std::size_t count_at = bytes.size();
  w.u32(0);  // the number of detached values, known at the end
  const auto& tasks = local.value().tasks;
  std::uint32_t count = 0;
  for (const auto& t : tasks) count += t.status != task_status::not_run ? 1 : 0;
  w.u32(count);
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    const task_report& t = tasks[k];
    if (t.status == task_status::not_run) continue;
    w.u32(static_cast<std::uint32_t>(k));
    w.u8(static_cast<std::uint8_t>(t.status));
    w.boolean(t.failure.has_value());
    if (t.failure) write_error(w, *t.failure);
    w.i64(to_ns(t.started));
    w.i64(to_ns(t.finished));
    w.u64(t.iterations);
    w.u32(static_cast<std::uint32_t>(t.outputs.size()));
    for (const auto& [name, value] : t.outputs) {
      w.string(name);
      auto codec = s->options.codecs->find(value->type());
      if (codec && codec->contiguous && codec->adopt) {
        const std::string_view view = codec->contiguous(*value);
        if (view.size() >= detach_threshold) {
          w.u8(1);
          w.string(codec->tag);
          w.u64(view.size());
          m.payloads.push_back({value, view});
          continue;
        }
      }
      w.u8(0);
      if (auto st = s->options.codecs->encode(*value, w); !st) {
        write_failure(st.error().with_context("task " + quote(t.name) + " output " + quote(name)));
        return m;
      }
    }
  }
  const auto detached_count = static_cast<std::uint32_t>(m.payloads.size());
  std::memcpy(bytes.data() + count_at, &detached_count, sizeof detached_count);
  return m;
}

// Takes the value that the handle of output blob `name` of `t` holds from
// an earlier run, when rank 0 received it apart (received_value) and
// nothing but the handle holds it: its storage can take the new value. The
// handle is left unset until the new value is in.
std::shared_ptr<const blob> take_reusable(const task& t, const std::string& name) {
  for (const auto& out : t.output_states()) {
    for (std::size_t i = 0; i < out->blobs.size() && i < out->values.size(); ++i) {
      const auto& v = out->values[i];
      if (out->blobs[i] != name || v.use_count() != 1 || std::get_deleter<received_value>(v) == nullptr) continue;
      std::shared_ptr<const blob> taken = v;
      out->values.clear();
      out->set = false;
      return taken;
    }
  }
  return nullptr;
}

// Receives a value sent apart from its STATUS message, into `reuse` when
// given (see take_reusable).
result<std::shared_ptr<const blob>> receive_detached(const impl_ptr& s, int from, const std::string& tag,
                                                     std::uint64_t size, std::shared_ptr<const blob> reuse) {
  auto codec = s->options.codecs->find(tag);
  if (!codec || !codec->adopt) return fail(errc::not_serializable, "no contiguous codec tagged " + quote(tag));
  if (size > static_cast<std::uint64_t>(INT_MAX)) return fail(errc::mpi_failed, "a value too large for one message");
  std::shared_ptr<const blob> value = std::move(reuse);
  if (!value) {
    auto storage = s->recycler->take(tag);
    if (!storage) storage = std::make_unique<blob>();
    value = std::shared_ptr<const blob>(storage.release(), received_value{s->recycler, tag});
  }
  // Made as a mutable blob (received_value) and held by no one else.
  char* where = codec->adopt(const_cast<blob&>(*value), static_cast<std::size_t>(size));  // NOLINT
  if (where == nullptr && size != 0) {
    return fail(errc::not_serializable, std::to_string(size) + " bytes cannot hold a " + tag);
  }
  TASKGROUP_TRY(check_mpi(
      MPI_Recv(where, static_cast<int>(size), MPI_BYTE, from, tag_payload, s->comm, MPI_STATUS_IGNORE), "MPI_Recv"));
  return value;
}

// Receives and drops values of a STATUS that could not be decoded, so that
// none is left to be mistaken for a later one.
void drain_detached(const impl_ptr& s, int from, std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i) {
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status probe;
    if (MPI_Mprobe(from, tag_payload, s->comm, &msg, &probe) != MPI_SUCCESS) return;
    int n = 0;
    MPI_Get_count(&probe, MPI_BYTE, &n);
    std::string scratch(static_cast<std::size_t>(n), '\0');
    MPI_Mrecv(scratch.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  }
}

// Fills the output handles of a task that ran on another rank.
void set_outputs(const task& t, const task_report& rep) {
  auto value_of = [&](const std::string& name) -> result<std::shared_ptr<const blob>> {
    auto it = std::find_if(rep.outputs.begin(), rep.outputs.end(), [&](const auto& kv) { return kv.first == name; });
    if (it == rep.outputs.end()) return fail(errc::output_not_set, "no value came from node " + quote(rep.node));
    return it->second;
  };
  for (const auto& out : t.output_states()) detail::set_output(*out, rep.status == task_status::succeeded, value_of);
}

// Decodes a STATUS into `report` (group order). Returns the rank's error,
// if it sent one.
result<verdict> decode_status(const impl_ptr& s, int from, std::uint64_t run_id, std::string_view bytes,
                              const task_group& group, run_report& report, run_observer* observer,
                              std::uint32_t& detached_count, std::uint32_t& detached_received) {
  const std::string who = "rank " + std::to_string(from);
  byte_reader r(bytes);
  TASKGROUP_TRY(auto id, r.u64());
  if (id != run_id) {
    return verdict{error(errc::group_mismatch, who + " answered for run " + std::to_string(id) + ", rank 0 is at run " +
                                                   std::to_string(run_id)),
                   {}};
  }
  TASKGROUP_TRY(auto kind, r.u8());
  if (kind == 1) {
    error e;
    TASKGROUP_TRY(read_error(r, e));
    return verdict{e.with_context(who), {}};
  }
  TASKGROUP_TRY(detached_count, r.u32());
  TASKGROUP_TRY(auto count, r.u32());
  for (std::uint32_t i = 0; i < count; ++i) {
    TASKGROUP_TRY(auto k, r.u32());
    if (k >= report.tasks.size()) return fail(errc::group_mismatch, who + " reported task #" + std::to_string(k));
    task_report& t = report.tasks[k];
    TASKGROUP_TRY(auto st, r.u8());
    if (st > static_cast<std::uint8_t>(task_status::not_run)) {
      return fail(errc::group_mismatch, who + " sent task status " + std::to_string(st));
    }
    t.status = static_cast<task_status>(st);
    TASKGROUP_TRY(auto has_failure, r.boolean());
    if (has_failure) {
      error e;
      TASKGROUP_TRY(read_error(r, e));
      t.failure = e.with_context(who);
    }
    TASKGROUP_TRY(auto started, r.i64());
    TASKGROUP_TRY(auto finished, r.i64());
    TASKGROUP_TRY(auto iterations, r.u64());
    t.started = from_ns(started);
    t.finished = from_ns(finished);
    t.iterations = iterations;
    TASKGROUP_TRY(auto outputs, r.u32());
    for (std::uint32_t j = 0; j < outputs; ++j) {
      TASKGROUP_TRY(auto name, r.string());
      TASKGROUP_TRY(auto mode, r.u8());
      result<std::shared_ptr<const blob>> value = error(errc::no_result, "no value");
      if (mode == 1) {
        TASKGROUP_TRY(auto tag, r.string());
        TASKGROUP_TRY(auto size, r.u64());
        value = receive_detached(s, from, tag, size, take_reusable(group.tasks()[k], name));
        if (value) ++detached_received;  // otherwise drained by the caller
      } else if (auto decoded = s->options.codecs->decode(r)) {
        value = std::make_shared<const blob>(std::move(decoded).value());
      } else {
        value = decoded.error();
      }
      if (!value) {
        return verdict{value.error().with_context(who + ": task " + quote(t.name) + " output " + quote(name)), {}};
      }
      t.outputs.emplace_back(name, std::move(value).value());
    }
    set_outputs(group.tasks()[k], t);
    if (observer != nullptr) {
      observer->task_begin(t.name, t.node);
      observer->task_end(t);
    }
  }
  if (!r.at_end()) return fail(errc::group_mismatch, who + " sent " + std::to_string(r.remaining()) + " stray bytes");
  return verdict{};
}

// ---- START and CTRL -----------------------------------------------------------

struct start_message {
  std::uint64_t run_id = 0;
  std::string fingerprint;
  run_policy policy = run_policy::join;
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<error> failure;  // rank 0 could not start the run
};

std::string encode_start(const start_message& m) {
  std::string bytes;
  byte_writer w(bytes);
  w.u64(m.run_id);
  w.string(m.fingerprint);
  w.u8(m.policy == run_policy::gather ? 1 : 0);
  w.u64(m.timeout ? static_cast<std::uint64_t>(m.timeout->count()) + 1 : 0);
  w.boolean(m.failure.has_value());
  if (m.failure) write_error(w, *m.failure);
  return bytes;
}

result<start_message> decode_start(std::string_view bytes) {
  byte_reader r(bytes);
  start_message m;
  TASKGROUP_TRY(m.run_id, r.u64());
  TASKGROUP_TRY(m.fingerprint, r.string());
  TASKGROUP_TRY(auto policy, r.u8());
  m.policy = policy == 1 ? run_policy::gather : run_policy::join;
  TASKGROUP_TRY(auto timeout, r.u64());
  if (timeout != 0) m.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout - 1));
  TASKGROUP_TRY(auto has_failure, r.boolean());
  if (has_failure) {
    error e;
    TASKGROUP_TRY(read_error(r, e));
    m.failure = e;
  }
  return m;
}

// CANCEL carries the run's error; DONE every task's status and failure,
// so that each rank knows how the whole run went.
std::string encode_ctrl(std::uint64_t run_id, const std::optional<error>& cancel, const run_report* done = nullptr) {
  std::string bytes;
  byte_writer w(bytes);
  w.u64(run_id);
  w.boolean(cancel.has_value());
  if (cancel) {
    write_error(w, *cancel);
    return bytes;
  }
  w.u32(done != nullptr ? static_cast<std::uint32_t>(done->tasks.size()) : 0);
  if (done != nullptr) {
    for (const auto& t : done->tasks) {
      w.u8(static_cast<std::uint8_t>(t.status));
      w.boolean(t.failure.has_value());
      if (t.failure) write_error(w, *t.failure);
    }
  }
  return bytes;
}

result<verdict> decode_ctrl(std::string_view bytes, std::uint64_t run_id) {
  byte_reader r(bytes);
  TASKGROUP_TRY(auto id, r.u64());
  if (id != run_id) {
    return fail(errc::group_mismatch,
                "rank 0 ended run " + std::to_string(id) + " during run " + std::to_string(run_id));
  }
  TASKGROUP_TRY(auto cancel, r.boolean());
  verdict v;
  if (cancel) {
    error e;
    TASKGROUP_TRY(read_error(r, e));
    v.e = e;
    return v;
  }
  TASKGROUP_TRY(auto n, r.u32());
  for (std::uint32_t i = 0; i < n; ++i) {
    TASKGROUP_TRY(auto st, r.u8());
    if (st > static_cast<std::uint8_t>(task_status::not_run)) {
      return fail(errc::group_mismatch, "rank 0 sent task status " + std::to_string(st));
    }
    TASKGROUP_TRY(auto has_failure, r.boolean());
    std::optional<error> failure;
    if (has_failure) {
      error e;
      TASKGROUP_TRY(read_error(r, e));
      failure = e;
    }
    v.tasks.emplace_back(static_cast<task_status>(st), std::move(failure));
  }
  return v;
}

// ---- rank 0 ------------------------------------------------------------------

asio::awaitable<result<run_report>> run_client(impl_ptr s, task_group group, run_options options,
                                               std::uint64_t run_id) {
  auto ctx = std::make_shared<run_ctx>(co_await asio::this_coro::executor);
  auto described = describe_group(*s, group);
  start_message start;
  start.run_id = run_id;
  start.policy = options.policy;
  start.timeout = options.timeout;
  if (described) {
    start.fingerprint = described.value()->text;
  } else {
    start.failure = described.error();
  }
  const std::string start_bytes = encode_start(start);
  for (int r = 1; r < s->size; ++r) send(s, *ctx, r, tag_start, start_bytes);
  if (start.failure) {
    // Nobody starts: the other ranks end the run with this error on START.
    pacer pace(s->options);
    while (!ctx->sends.empty() && !ctx->mpi_error) {
      const bool progressed = progress_sends(*ctx);
      if (ctx->sends.empty()) break;
      co_await pace.wait(*ctx, progressed, std::nullopt);
    }
    co_return *start.failure;
  }

  run_report report;
  report.started = std::chrono::system_clock::now();
  for (const auto& t : group.tasks()) {
    task_report& rep = report.tasks.emplace_back();
    rep.name = t.name();
    rep.node = t.node_name();
  }
  if (options.observer != nullptr) {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& t : report.tasks) names.emplace_back(t.name, t.node);
    options.observer->run_begin(names);
  }
  start_local(s, ctx, group, described.value()->where, options);

  std::vector<bool> answered(static_cast<std::size_t>(s->size), false);
  std::vector<bool> told(static_cast<std::size_t>(s->size), false);
  answered[0] = told[0] = true;
  std::optional<error> first;  // the run's error
  std::optional<clock_type::time_point> deadline;
  if (options.timeout) deadline = clock_type::now() + *options.timeout;
  std::optional<clock_type::time_point> grace_until;
  bool cancelled_outside = false;
  bool local_seen = false;

  auto fail_run = [&](error e) {
    if (first) return;
    first = std::move(e);
    for (int r = 1; r < s->size; ++r) {
      if (!told[static_cast<std::size_t>(r)]) {
        send(s, *ctx, r, tag_ctrl, encode_ctrl(run_id, first));
        told[static_cast<std::size_t>(r)] = true;
      }
    }
    cancel_local(*ctx);
    grace_until = clock_type::now() + s->options.grace;
  };

  pacer pace(s->options);
  std::string bytes;
  for (;;) {
    bool progressed = false;
    if (!cancelled_outside && outside_cancelled(co_await asio::this_coro::cancellation_state)) {
      cancelled_outside = true;
      progressed = true;
      fail_run(error(errc::cancelled, "run cancelled"));
    }
    if (ctx->local_done && !local_seen) {
      local_seen = true;
      progressed = true;
      if (!ctx->local) {
        fail_run(ctx->local.error().with_context("rank 0"));
      } else {
        for (std::size_t k = 0; k < report.tasks.size(); ++k) {
          const task_report& mine = ctx->local.value().tasks[k];
          if (mine.status != task_status::not_run) report.tasks[k] = mine;
        }
      }
    }
    int from = 0;
    while (try_receive(s, *ctx, MPI_ANY_SOURCE, tag_status, bytes, from)) {
      progressed = true;
      answered[static_cast<std::size_t>(from)] = true;
      std::uint32_t detached_count = 0;
      std::uint32_t detached_received = 0;
      auto got =
          decode_status(s, from, run_id, bytes, group, report, options.observer, detached_count, detached_received);
      if (detached_received < detached_count) drain_detached(s, from, detached_count - detached_received);
      if (!got) {
        fail_run(got.error());
      } else if (got.value().e) {
        fail_run(*got.value().e);
      }
    }
    progressed = progress_sends(*ctx) || progressed;
    if (ctx->mpi_error) {
      cancel_local(*ctx);
      if (ctx->local_done) break;
    }
    const bool all_answered = std::all_of(answered.begin(), answered.end(), [](bool b) { return b; });
    if (ctx->local_done && all_answered && !ctx->mpi_error) {
      std::string done;
      for (int r = 1; r < s->size; ++r) {
        if (!told[static_cast<std::size_t>(r)]) {
          if (done.empty()) done = encode_ctrl(run_id, std::nullopt, &report);
          send(s, *ctx, r, tag_ctrl, done);
          told[static_cast<std::size_t>(r)] = true;
        }
      }
      // A short message usually completes at once: no extra poll.
      progress_sends(*ctx);
      if (ctx->sends.empty() && !ctx->mpi_error) break;
    }
    const auto now = clock_type::now();
    if (deadline && now >= *deadline && !first) {
      fail_run(error(errc::timeout, "run timed out after " + std::to_string(options.timeout->count()) + " ms"));
      progressed = true;
    }
    if (grace_until && now >= *grace_until) {
      std::string silent;
      for (int r = 0; r < s->size; ++r) {
        if (!answered[static_cast<std::size_t>(r)]) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      }
      abort_job(s, "the run failed (" + first->message + ") and " +
                       (silent.empty() ? std::string("this rank's tasks") : "rank(s) " + silent) +
                       " did not finish within " + std::to_string(s->options.grace.count()) + " ms");
    }
    co_await pace.wait(*ctx, progressed, grace_until ? grace_until : deadline);
  }
  report.finished = std::chrono::system_clock::now();
  if (ctx->mpi_error) co_return *ctx->mpi_error;
  if (first) co_return *first;
  co_return report;
}

// ---- other ranks ------------------------------------------------------------

// While a worker runs its tasks, their outputs are fetched as the node
// workspaces' blobs themselves (output_state::borrow), so that STATUS sends
// them from there without a copy.
class borrowed_outputs {
 public:
  borrowed_outputs(const task_group& g, const std::map<std::string, int>& where, int rank) {
    for (const auto& t : g.tasks()) {
      if (where.at(t.node_name()) != rank) continue;
      for (const auto& out : t.output_states()) {
        out->borrow = true;
        states_.push_back(out);
      }
    }
  }
  ~borrowed_outputs() {
    for (const auto& out : states_) out->borrow = false;
  }
  borrowed_outputs(const borrowed_outputs&) = delete;
  borrowed_outputs& operator=(const borrowed_outputs&) = delete;

 private:
  std::vector<std::shared_ptr<detail::output_state>> states_;
};

// Once sent, borrowed values are copied for the worker's own report and
// output handles (what a local run gives), so that those do not change
// with the workspace in later runs. A value that cannot be copied leaves
// its handle with the copy's error and the report without it.
void keep_copies(const impl_ptr& s, const task_group& group, run_report& report) {
  for (std::size_t k = 0; k < report.tasks.size() && k < group.tasks().size(); ++k) {
    task_report& rep = report.tasks[k];
    if (rep.outputs.empty()) continue;
    auto ws = s->local->node_workspace(rep.node);
    std::map<const blob*, std::shared_ptr<const blob>> copies;
    std::map<const blob*, error> failures;
    for (auto& [name, value] : rep.outputs) {
      if (value.get() != ws->find(name)) continue;  // a copy already
      auto copy = value->clone();
      if (copy) {
        copies[value.get()] = std::make_shared<const blob>(std::move(copy).value());
      } else {
        failures.emplace(value.get(), copy.error());
      }
    }
    if (copies.empty() && failures.empty()) continue;
    for (const auto& out : group.tasks()[k].output_states()) {
      for (std::size_t i = 0; i < out->values.size(); ++i) {
        const blob* b = out->values[i].get();
        if (auto it = failures.find(b); it != failures.end()) {
          out->failure = it->second.with_context("task " + quote(out->task) + " output " + quote(out->blobs.at(i)));
          out->set = false;
          out->values.clear();
          break;
        }
        if (auto it = copies.find(b); it != copies.end()) out->values[i] = it->second;
      }
    }
    std::erase_if(rep.outputs, [&](const auto& kv) { return failures.count(kv.second.get()) != 0; });
    for (auto& kv : rep.outputs) {
      if (auto it = copies.find(kv.second.get()); it != copies.end()) kv.second = it->second;
    }
  }
}

asio::awaitable<result<run_report>> run_worker(impl_ptr s, task_group group, run_options options,
                                               std::uint64_t run_id) {
  auto ctx = std::make_shared<run_ctx>(co_await asio::this_coro::executor);
  const std::string who = "rank " + std::to_string(s->rank);
  bool cancelled_outside = false;
  pacer pace(s->options);
  std::string bytes;
  int from = 0;
  // A watchdog while waiting for rank 0: this rank's own deadline, if any.
  std::optional<clock_type::time_point> watchdog;
  if (options.timeout) watchdog = clock_type::now() + *options.timeout + s->options.grace;

  // START
  std::optional<start_message> start;
  for (;;) {
    bool progressed = false;
    if (!cancelled_outside && outside_cancelled(co_await asio::this_coro::cancellation_state)) {
      cancelled_outside = true;  // answered once the run is known
    }
    if (try_receive(s, *ctx, 0, tag_start, bytes, from)) {
      auto m = decode_start(bytes);
      if (!m) co_return m.error().with_context(who + ": the run's start from rank 0");
      start = std::move(m).value();
      break;
    }
    if (ctx->mpi_error) co_return *ctx->mpi_error;
    if (watchdog && clock_type::now() >= *watchdog) abort_job(s, "rank 0 did not start the run in time");
    co_await pace.wait(*ctx, progressed, watchdog);
  }
  if (start->failure) co_return *start->failure;  // rank 0 told everyone not to start

  std::optional<error> refused;
  auto described = describe_group(*s, group);
  if (start->run_id != run_id) {
    refused = error(errc::group_mismatch,
                    "is at run " + std::to_string(run_id) + ", rank 0 at run " + std::to_string(start->run_id));
  } else if (!described) {
    refused = described.error();
  } else if (start->fingerprint != described.value()->text) {
    refused = group_mismatch(s->rank, split_lines(start->fingerprint), described.value()->lines);
  }
  if (!refused) {
    if (auto st = check_output_codecs(group, *s->options.codecs); !st) refused = st.error();
  }
  if (!refused && cancelled_outside) refused = error(errc::cancelled, "run cancelled");
  std::optional<borrowed_outputs> borrowed;
  if (refused) {
    ctx->local_done = true;
    ctx->local = *refused;
  } else {
    run_options local = options;
    local.policy = start->policy;
    borrowed.emplace(group, described.value()->where, s->rank);
    start_local(s, ctx, group, described.value()->where, local);
  }
  watchdog.reset();
  if (start->timeout) watchdog = clock_type::now() + *start->timeout + s->options.grace;

  bool status_sent = false;
  std::optional<std::optional<error>> ctrl;                          // set once CTRL arrived
  std::vector<std::pair<task_status, std::optional<error>>> others;  // from DONE
  for (;;) {
    bool progressed = false;
    if (!cancelled_outside && outside_cancelled(co_await asio::this_coro::cancellation_state)) {
      cancelled_outside = true;
      progressed = true;
      cancel_local(*ctx);
    }
    if (!ctrl && try_receive(s, *ctx, 0, tag_ctrl, bytes, from)) {
      progressed = true;
      auto c = decode_ctrl(bytes, run_id);
      ctrl = c ? c.value().e : std::optional<error>(c.error());
      if (c) others = std::move(c.value().tasks);
      if (*ctrl) cancel_local(*ctx);
    }
    if (ctx->local_done && !status_sent) {
      progressed = true;
      status_sent = true;
      status_message m = encode_status(s, run_id, ctx->local);
      send(s, *ctx, 0, tag_status, std::move(m.bytes));
      for (auto& p : m.payloads) send_bytes(s, *ctx, 0, tag_payload, p.bytes, std::move(p.keep));
    }
    // Pending sends keep the loop polling closely: a large value only
    // moves while this rank calls into MPI.
    progressed = progress_sends(*ctx) || !ctx->sends.empty() || progressed;
    if (ctx->mpi_error) {
      cancel_local(*ctx);
      if (ctx->local_done) {
        if (ctx->local) keep_copies(s, group, ctx->local.value());
        co_return *ctx->mpi_error;
      }
    }
    if (status_sent && ctrl && ctx->sends.empty()) break;
    if (watchdog && clock_type::now() >= *watchdog) {
      abort_job(s, "no word from rank 0 within the run's deadline and the grace period");
    }
    co_await pace.wait(*ctx, progressed, watchdog);
  }
  if (ctx->local) keep_copies(s, group, ctx->local.value());
  if (*ctrl) co_return **ctrl;
  // The other ranks' tasks: their status and failure (their outputs stay
  // on rank 0).
  if (ctx->local && others.size() == ctx->local.value().tasks.size()) {
    for (std::size_t k = 0; k < others.size(); ++k) {
      task_report& t = ctx->local.value().tasks[k];
      if (t.status != task_status::not_run) continue;
      t.status = others[k].first;
      t.failure = std::move(others[k].second);
    }
  }
  co_return ctx->local;
}

asio::awaitable<result<run_report>> run_protocol(impl_ptr s, task_group group, run_options options) {
  if (s->init_error) co_return *s->init_error;
  // Every rank makes the same check before any message: all fail alike.
  if (auto e = s->wrong_thread("the run's MPI protocol runs")) co_return std::move(*e);
  if (s->running.exchange(true)) co_return error(errc::invalid_task, "a run is already in flight on this MPI session");
  const std::uint64_t run_id = ++s->runs;
  co_await asio::this_coro::throw_if_cancelled(false);
  result<run_report> r = error(errc::no_result, "no result");
  try {
    if (s->rank == 0) {
      r = co_await run_client(s, std::move(group), options, run_id);
    } else {
      r = co_await run_worker(s, std::move(group), options, run_id);
    }
  } catch (...) {
    r = detail::error_from_exception(std::current_exception());
  }
  s->running.store(false);
  co_return r;
}

}  // namespace

mpi_session::mpi_session(asio::any_io_executor ex, mpi_options options)
    : local_(std::make_unique<local_session>(std::move(ex))),
      impl_(std::make_shared<impl>(*local_, std::move(options), false)) {}
mpi_session::mpi_session(std::size_t threads, mpi_options options)
    : pool_(std::make_unique<asio::thread_pool>(std::max<std::size_t>(threads, 1))),
      local_(std::make_unique<local_session>(pool_->get_executor())),
      impl_(std::make_shared<impl>(*local_, std::move(options), threads > 1)) {}

// With an owned pool: wait for the work in flight, then drop the strand and
// the local session while the pool (their execution context) still exists.
mpi_session::~mpi_session() {
  local_->close();
  if (pool_) pool_->join();
  impl_.reset();
  local_.reset();
}

int mpi_session::rank() const noexcept { return impl_->rank; }
int mpi_session::size() const noexcept { return impl_->size; }
local_session& mpi_session::local() noexcept { return *local_; }
asio::any_io_executor mpi_session::strand() const { return impl_->strand; }

result<std::map<std::string, int>> mpi_session::placement(const task_group& group) const { return impl_->place(group); }

asio::awaitable<result<run_report>> mpi_session::run(task_group group, run_options options) {
  co_return co_await async_run(std::move(group), asio::use_awaitable, options);
}

asio::awaitable<result<run_report>> mpi_session::run_on_strand(task_group group, run_options options) {
  return run_protocol(impl_, std::move(group), options);
}

result<run_report> mpi_session::run_blocking(task_group group, run_options options) {
  if (impl_->strand.running_in_this_thread()) {
    return fail(errc::invalid_task, "run_blocking called from the MPI session's own strand would deadlock");
  }
  // The protocol runs on this thread, which would otherwise only wait: no
  // hand-off to a pool thread at the start of the run nor back at its end.
  // The tasks run on the session's executor as with `run`.
  std::unique_lock lock(impl_->blocking_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return fail(errc::invalid_task, "a run is already in flight on this MPI session");
  auto& here = impl_->blocking_loop ? *impl_->blocking_loop : impl_->blocking_loop.emplace(1);
  here.restart();
  result<run_report> out = error(errc::no_result, "the run did not complete");
  asio::co_spawn(here, run_protocol(impl_, std::move(group), options),
                 [&out](const std::exception_ptr& ep, result<run_report> r) {
                   out = ep ? detail::error_from_exception(ep) : std::move(r);
                 });
  try {
    here.run();
  } catch (...) {
    return detail::error_from_exception(std::current_exception());
  }
  return out;
}

}  // namespace taskgroup
