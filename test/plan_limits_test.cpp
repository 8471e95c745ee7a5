// Plan files within documented limits: strict JSON (no duplicate keys,
// UTF-8, finite numbers, 64-bit integers), bounded durations, instance
// counts, names, sizes and depths, each refused with a clear error.
#include <taskgroup/plan.hpp>

#include <taskgroup/session.hpp>

#include "fuzz/plan_round_trip.hpp"
#include "support/steps.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

std::string limits_read_error(std::string_view text) {
  auto g = read_plan(text);
  REQUIRE_FALSE(g);
  CHECK(g.error().code == errc::invalid_plan);
  return g.error().message;
}

bool reads(std::string_view text) { return static_cast<bool>(read_plan(text)); }

// A plan of one task on `local` whose step is `step_json`, with net "n".
std::string with_step(const std::string& step_json) {
  return R"({"taskgroup_plan": 1, "nets": [{"name": "n", "ops": []}], "tasks": [{"name": "t", "step": )" + step_json +
         "}]}";
}

std::string with_arg(const std::string& value_json) {
  return R"({"taskgroup_plan": 1, "nets": [{"name": "n", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": )" +
         value_json + "}}]}]}";
}

// Plans holding the "retry" object `retry_json` at each place a policy may
// be, beside that place's JSON pointer.
std::vector<std::pair<std::string, std::string>> with_retry(const std::string& retry_json) {
  const std::string head = R"({"taskgroup_plan": 1, "nets": [{"name": "n", "ops": []}], "tasks": [{"name": "t", )";
  const std::string r = R"("retry": )" + retry_json;
  return {
      {head + r + R"(, "step": {"nets": ["n"]}}]})", "/tasks/0/retry"},
      {with_step(R"({"nets": ["n"], )" + r + "}"), "/tasks/0/step/retry"},
      {with_step(R"({"substeps": [{"nets": ["n"]}, {"nets": ["n"], )" + r + "}]}"), "/tasks/0/step/substeps/1/retry"},
      {head + R"("init": [{"net": "n"}, {"nets": ["n"], )" + r + "}]}]}", "/tasks/0/init/1/retry"},
      {head + R"("reports": [{"step": {"nets": ["n"], )" + r + "}}]}]}", "/tasks/0/reports/0/step/retry"},
      {head + R"("step": {"nets": ["n"]}}], "report_steps": [{"step": {"nets": ["n"], )" + r + "}}]}",
       "/report_steps/0/step/retry"},
      {head + R"("step": {"nets": ["n"]}}], "local_init": [{"body": [{"nets": ["n"], )" + r + "}]}]}",
       "/local_init/0/body/0/retry"},
  };
}

net fill_double(const std::string& name, double d) {
  net n(name);
  n.op("ConstantFill", {}, {"x"}, {{"value", d}});
  return n;
}

// A chain of `levels` nested steps, the innermost running a net.
execution_step chain(std::size_t levels) {
  execution_step s = step("leaf").add_net(fill_int("leaf", "x", 1));
  for (std::size_t i = 1; i < levels; ++i) s = step("l" + std::to_string(i)).add_substep(s);
  return s;
}

// Runs `f` on a thread with a stack of `bytes`.
template <class F>
void on_small_stack(std::size_t bytes, F f) {
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, bytes) == 0);
  pthread_t th;
  auto body = [](void* p) -> void* {
    (*static_cast<F*>(p))();
    return nullptr;
  };
  REQUIRE(pthread_create(&th, &attr, body, &f) == 0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace

TEST_CASE("plan durations beyond max_duration are refused, naming the key and the limit", "[plan]") {
  const std::string limit = "must be at most 1099511627776 ms (taskgroup::max_duration, about 34.8 years)";
  CHECK(limits_read_error(with_step(R"({"nets": ["n"], "timeout_ms": 10000000000000})")) ==
        "/tasks/0/step/timeout_ms: " + limit + ", got 10000000000000");
  CHECK(limits_read_error(
            with_step(R"({"substeps": [{"nets": ["n"]}, {"nets": ["n"], "run_every_ms": 4611686018427387904}]})")) ==
        "/tasks/0/step/substeps/1/run_every_ms: " + limit + ", got 4611686018427387904");
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "nets": [{"name": "n"}], "tasks": [{"step": {"nets": ["n"]},
      "reports": [{"interval_ms": 9223372036854775807, "step": {"nets": ["n"]}}]}]})") ==
        "/tasks/0/reports/0/interval_ms: " + limit + ", got 9223372036854775807");
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "nets": [{"name": "n"}], "tasks": [{"step": {"nets": ["n"]}}],
      "report_steps": [{"interval_ms": 1099511627777, "step": {"nets": ["n"]}}]})") ==
        "/report_steps/0/interval_ms: " + limit + ", got 1099511627777");
  CHECK(reads(with_step(R"({"nets": ["n"], "timeout_ms": 1099511627776})")));
  CHECK(limits_read_error(with_step(R"({"nets": ["n"], "timeout_ms": 0})")) ==
        "/tasks/0/step/timeout_ms: must be > 0 ms, got 0");
}

TEST_CASE("retry policies are refused at the member at fault, in the policy's words for its limits", "[plan]") {
  const std::string limit = "must be at most 1099511627776 ms (taskgroup::max_duration, about 34.8 years)";
  const std::string no_code = R"( names no error code (taskgroup::errc, e.g. "op_failed"))";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"3", ": expected an object, got integer"},
      {"[]", ": expected an object, got array"},
      {R"({"max_attemps": 3})", R"(/max_attemps: unknown key "max_attemps")"},
      {R"({"max_attempts": "3"})", "/max_attempts: expected an integer, got string"},
      {R"({"max_attempts": 2.0})", "/max_attempts: expected an integer, got number"},
      {R"({"max_attempts": 0})", "/max_attempts: max_attempts must be in [1, 1000], got 0"},
      {R"({"max_attempts": 1001})", "/max_attempts: max_attempts must be in [1, 1000], got 1001"},
      // Past the policy's int: the same words, with the value written.
      {R"({"max_attempts": -5000000000})", "/max_attempts: max_attempts must be in [1, 1000], got -5000000000"},
      {R"({"max_attempts": 9223372036854775808})",
       "/max_attempts: integer out of range (at most 9223372036854775807), got 9223372036854775808"},
      {R"({"initial_backoff_ms": -1})", "/initial_backoff_ms: initial_backoff must be >= 0 ms, got -1"},
      {R"({"initial_backoff_ms": 1.5})", "/initial_backoff_ms: expected an integer, got number"},
      {R"({"max_backoff_ms": 1099511627777})", "/max_backoff_ms: max_backoff " + limit + ", got 1099511627777"},
      {R"({"multiplier": 0.5})", "/multiplier: multiplier must be finite and >= 1, got 0.5"},
      {R"({"multiplier": -3})", "/multiplier: multiplier must be finite and >= 1, got -3"},
      {R"({"multiplier": "2"})", "/multiplier: expected a number, got string"},
      {R"({"jitter": 1})", "/jitter: expected true or false, got integer"},
      {R"({"retry_on": "timeout"})", "/retry_on: expected an array, got string"},
      {R"({"retry_on": ["timeout", 7]})", "/retry_on/1: expected a string, got integer"},
      {R"({"retry_on": ["timeout", "op_faild"]})", R"(/retry_on/1: "op_faild")" + no_code},
      {R"({"retry_on": ["Timeout"]})", R"(/retry_on/0: "Timeout")" + no_code},
      {R"({"retry_on": ["a\u0001b"]})", R"(/retry_on/0: "a\u0001b")" + no_code},
      {R"({"retry_on": ["op_failed", "cancelled"]})",
       "/retry_on/1: retry_on must not hold cancelled: it is never retried"},
  };
  for (const auto& [retry, fault] : cases) {
    for (const auto& [text, at] : with_retry(retry)) {
      INFO(text);
      CHECK(limits_read_error(text) == at + fault);
    }
  }
  // Every code that is never retried, by its name.
  for (int c = 1; !name_of(static_cast<errc>(c)).empty(); ++c) {
    const std::string name(name_of(static_cast<errc>(c)));
    const auto [text, at] = with_retry(R"({"retry_on": [")" + name + R"("]})").front();
    if (retryable(static_cast<errc>(c))) {
      CHECK(reads(text));
    } else {
      CHECK(limits_read_error(text) == at + "/retry_on/0: retry_on must not hold " + name + ": it is never retried");
    }
  }
  // The limits themselves are within them.
  for (const auto& [text, at] : with_retry(R"({"max_attempts": 1000, "initial_backoff_ms": 0, "multiplier": 1,
      "max_backoff_ms": 1099511627776, "jitter": false, "retry_on": []})")) {
    INFO(text);
    CHECK(reads(text));
  }
}

TEST_CASE("plan instance counts beyond max_instances are refused, naming the key and the limit", "[plan]") {
  CHECK(limits_read_error(with_step(R"({"nets": ["n"], "num_concurrent_instances": 1000000})")) ==
        "/tasks/0/step/num_concurrent_instances: must be at most 65536 (taskgroup::max_instances), got 1000000");
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "tasks": [{"num_instances": 4611686018427387904}]})") ==
        "/tasks/0/num_instances: must be at most 65536 (taskgroup::max_instances), got 4611686018427387904");
  CHECK(reads(R"({"taskgroup_plan": 1, "tasks": [{"num_instances": 65536}]})"));
}

TEST_CASE("duplicate keys are refused, naming the key and its place", "[plan]") {
  CHECK(limits_read_error(R"({"taskgroup_plan":2,"taskgroup_plan":1})") ==
        "line 1, column 21: duplicate key \"taskgroup_plan\"");
  CHECK(limits_read_error("{\"taskgroup_plan\": 1,\n \"tasks\": [{\"name\": \"a\"}],\n \"tasks\": []}") ==
        "line 3, column 2: duplicate key \"tasks\"");
  // The same key in different objects is fine.
  CHECK(reads(R"({"taskgroup_plan": 1, "tasks": [{"name": "a"}, {"name": "b"}]})"));
}

TEST_CASE("integers beyond 64 bits are refused as out of range", "[plan]") {
  CHECK(limits_read_error(with_step(R"({"nets": ["n"], "num_iter": 18446744073709551615})")) ==
        "/tasks/0/step/num_iter: integer out of range (at most 9223372036854775807), got 18446744073709551615");
  CHECK(limits_read_error(with_step(R"({"nets": ["n"], "num_iter": 99999999999999999999})")) ==
        "line 1, column 119: integer out of range (integers fit in 64 bits): 99999999999999999999");
  CHECK(limits_read_error(with_arg("9223372036854775808")) ==
        "/nets/0/ops/0/args/value: integer out of range (at most 9223372036854775807), got 9223372036854775808");
  CHECK(limits_read_error(with_arg("[1, 9223372036854775808]")) ==
        "/nets/0/ops/0/args/value/1: integer out of range (at most 9223372036854775807), got 9223372036854775808");
  CHECK(limits_read_error(with_arg(R"({"type": "int64", "value": 1e3})")) ==
        "/nets/0/ops/0/args/value/value: expected an integer, got number");
  CHECK(reads(with_arg("-9223372036854775808")));
}

TEST_CASE("non-finite numbers are refused when read and never written", "[plan]") {
  CHECK(limits_read_error(with_arg("1e999")) == "line 1, column 115: number out of range (not a finite double): 1e999");
  CHECK(limits_read_error(with_arg(R"({"type": "list<double>", "value": [1.5, -1e400]})")) ==
        "line 1, column 155: number out of range (not a finite double): -1e400");
  // Underflow reads as zero, which is finite.
  CHECK(reads(with_arg("1e-400")));

  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(fill_double("inf_net", std::numeric_limits<double>::infinity())))));
  auto w = write_plan(g);
  REQUIRE_FALSE(w);
  CHECK(w.error().code == errc::not_serializable);
  CHECK(w.error().message ==
        "task \"local/t\": net \"inf_net\" op #0 (ConstantFill): argument \"value\": not a finite number (inf), "
        "which JSON cannot hold");
  task_group h;
  net nan_list("nan_net");
  nan_list.op("ConstantFill", {}, {"x"}, {{"value", std::vector<double>{1.0, std::nan("")}}});
  REQUIRE(h.add(task("t", step("s").add_net(nan_list))));
  CHECK_THAT(write_plan(h).error().message, Catch::Contains("net \"nan_net\" op #0 (ConstantFill): argument "
                                                            "\"value\": not a finite number (nan)"));
  task_group k;
  REQUIRE(k.add(task("t", step("s").add_net(fill_int("a", "x", 1))),
                node("n1", {{"scale", -std::numeric_limits<double>::infinity()}})));
  CHECK(write_plan(k).error().message ==
        "node \"n1\": option \"scale\": not a finite number (-inf), which JSON cannot hold");
  // A document built in C++ may hold one: the reader refuses it there too.
  auto doc = boost::json::parse(with_arg("1.5"));
  doc.at("nets").at(0).at("ops").at(0).at("args").at("value") = std::numeric_limits<double>::infinity();
  auto r = read_plan(doc);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "/nets/0/ops/0/args/value: not a finite number");
}

TEST_CASE("doubles of any magnitude are written and read back exactly", "[plan]") {
  for (double d : {9.3e18, -9.3e18, 1e300, 0.1, 5e-324, -0.0, 9007199254740993.0, 1.7976931348623157e308}) {
    task_group g;
    REQUIRE(g.add(task("t", step("s").add_net(fill_double("d", d)))));
    auto text = write_plan(g).value();
    auto back = read_plan(text).value();
    const double arg = back.tasks().at(0).step()->nets().at(0).ops().at(0).args.get<double>("value").value();
    CHECK(std::signbit(arg) == std::signbit(d));
    CHECK(arg == d);
    CHECK(write_plan(back).value() == text);
  }
}

TEST_CASE("invalid UTF-8 and a byte order mark are named as such", "[plan]") {
  CHECK(limits_read_error("{\"taskgroup_plan\": 1,\n \"tasks\": [{\"name\": \"a\xff\"}]}") ==
        "invalid UTF-8 at line 2, column 23 (byte 0xFF)");
  CHECK(limits_read_error("{\"taskgroup_plan\": 1, \"tasks\": [{\"name\": \"\xc3\xa9\xc0\xaf\"}]}") ==
        "invalid UTF-8 at line 1, column 44 (byte 0xC0)");  // an overlong '/'
  CHECK(limits_read_error("{\"taskgroup_plan\": 1, \"tasks\": [{\"name\": \"\xed\xa0\x80\"}]}") ==
        "invalid UTF-8 at line 1, column 43 (byte 0xED)");  // a surrogate
  CHECK(limits_read_error("\xef\xbb\xbf{\"taskgroup_plan\": 1}") ==
        "line 1, column 1: a byte order mark (BOM) starts the text; plans are UTF-8 without one");
  auto f = read_feeds(std::string_view("\xef\xbb\xbf{}"), task_group());
  REQUIRE_FALSE(f);
  CHECK(f.error().message == "line 1, column 1: a byte order mark (BOM) starts the text; inputs are UTF-8 without one");
  // Columns count characters, not bytes.
  CHECK(limits_read_error("{\"tasks\": [{\"name\": \"\xc3\xa9\xc3\xa9\"}], }") == "line 1, column 29: syntax error");
  CHECK(reads("{\"taskgroup_plan\": 1, \"tasks\": [{\"name\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}]}"));
}

TEST_CASE("names with control characters are refused", "[plan]") {
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "tasks": [{"name": "a\u0000b"}]})") ==
        "/tasks/0/name: a name cannot hold control characters, got \"a\\u0000b\"");
  CHECK(limits_read_error(with_step(R"({"name": "s\n", "nets": ["n"]})")) ==
        "/tasks/0/step/name: a name cannot hold control characters, got \"s\\u000A\"");
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "nets": [{"name": "\u001f"}]})") ==
        "/nets/0/name: a name cannot hold control characters, got \"\\u001F\"");
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "tasks": [{"node": "x\u007f"}]})") ==
        "/tasks/0/node: a name cannot hold control characters, got \"x\\u007F\"");
  // Keys are shown escaped in pointers and messages.
  CHECK(limits_read_error(R"({"taskgroup_plan": 1, "t\u0001": 1})") == "/t\\u0001: unknown key \"t\\u0001\"");
  // String arguments are data: any character is fine.
  CHECK(reads(with_arg(R"("tab\there \u0000")")));
}

TEST_CASE("plans larger than max_plan_size are refused before parsing", "[plan]") {
  CHECK(max_plan_size == 268435456);
  // Untouched anonymous pages: the check must not read them.
  const std::size_t size = max_plan_size + 1;
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(p != MAP_FAILED);
  CHECK(limits_read_error(std::string_view(static_cast<const char*>(p), size)) ==
        "the plan is 268435457 bytes, more than 268435456 (taskgroup::max_plan_size, 256 MiB)");
  // The same limit for inputs text, in its own words.
  auto f = read_feeds(std::string_view(static_cast<const char*>(p), size), task_group());
  REQUIRE_FALSE(f);
  CHECK(f.error().message ==
        "the inputs text is 268435457 bytes, more than 268435456 (taskgroup::max_plan_size, 256 MiB)");
  munmap(p, size);
}

TEST_CASE("plan and inputs files are read through one bounded reader that names them", "[plan][feeds]") {
  const auto dir = std::filesystem::temp_directory_path() / ("taskgroup_files_" + std::to_string(::getpid()));
  std::filesystem::create_directory(dir);
  const auto plan_message = [](const std::filesystem::path& path) {
    auto g = read_plan_file(path);
    REQUIRE_FALSE(g);
    CHECK(g.error().code == errc::invalid_plan);
    return g.error().message;
  };
  const task_group none;
  const auto inputs_message = [&](const std::filesystem::path& path) {
    auto f = read_feeds_file(path, none);
    REQUIRE_FALSE(f);
    CHECK(f.error().code == errc::invalid_plan);
    return f.error().message;
  };
  const std::string limit = " (taskgroup::max_plan_size, 256 MiB)";
  const std::string d = "\"" + dir.string() + "\"";

  SECTION("a regular file over the limit is refused before it is read") {
    const auto file = dir / "big.json";
    std::ofstream(file).put(' ');
    std::filesystem::resize_file(file, max_plan_size + 1);  // sparse
    const std::string f = "\"" + file.string() + "\"";
    CHECK(plan_message(file) == "plan file " + f + " is 268435457 bytes, more than 268435456" + limit);
    CHECK(inputs_message(file) == "inputs file " + f + " is 268435457 bytes, more than 268435456" + limit);
  }
  SECTION("a file of no known size is read up to one byte past the limit") {
    CHECK(plan_message("/dev/zero") == "plan file \"/dev/zero\" holds more than 268435456 bytes" + limit);
    CHECK(inputs_message("/dev/zero") == "inputs file \"/dev/zero\" holds more than 268435456 bytes" + limit);
  }
  SECTION("a directory is not read") {
    CHECK(plan_message(dir) == "cannot read plan file " + d + ": it is a directory");
    CHECK(inputs_message(dir) == "cannot read inputs file " + d + ": it is a directory");
  }
  SECTION("a missing file says why it cannot be opened") {
    const auto file = dir / "none.json";
    const std::string f = "\"" + file.string() + "\"";
    CHECK(plan_message(file) == "cannot open plan file " + f + ": No such file or directory");
    CHECK(inputs_message(file) == "cannot open inputs file " + f + ": No such file or directory");
  }
  SECTION("faults in the text follow the file's name") {
    const auto file = dir / "bad.json";
    std::ofstream(file) << "[1, 2]";
    CHECK(plan_message(file) == file.string() + ": /: expected an object, got array");
    CHECK(inputs_message(file) == "inputs file \"" + file.string() + "\": /: expected an object, got array");
  }
  SECTION("a plan and its inputs from pipes") {
    const auto plan_pipe = dir / "plan.fifo";
    const auto inputs_pipe = dir / "inputs.fifo";
    REQUIRE(::mkfifo(plan_pipe.c_str(), 0600) == 0);
    REQUIRE(::mkfifo(inputs_pipe.c_str(), 0600) == 0);
    std::thread writer([&] {
      std::ofstream(plan_pipe) << R"({"taskgroup_plan": 1, "inputs": [{"node": "n", "blob": "x"}], )"
                                  R"("tasks": [{"node": "n", "step": {"nets": ["f"]}}], "nets": [{"name": "f", )"
                                  R"("ops": [{"type": "ConstantFill", "outputs": ["z"], "args": {"value": 1}}]}]})";
      std::ofstream(inputs_pipe) << R"({"n/x": 7})";
    });
    auto g = read_plan_file(plan_pipe);
    auto f = read_feeds_file(inputs_pipe, g ? g.value() : none);  // read even so: the writer waits for it
    writer.join();
    REQUIRE(g);
    REQUIRE(f);
    REQUIRE(f.value().entries().size() == 1);
    CHECK(f.value().entries()[0].value->as<std::int64_t>() == 7);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a group max_step_depth levels deep is written and read back", "[plan]") {
  task_group g;
  REQUIRE(g.add(task("deep", chain(max_step_depth))));
  auto text = write_plan(g).value();
  auto back = read_plan(text);
  REQUIRE(back);
  CHECK(write_plan(back.value()).value() == text);
  // And in a task's report step, the deepest place of the format.
  task_group r;
  task t("t", step("s").add_net(fill_int("a", "x", 1)));
  t.report(chain(max_step_depth), std::chrono::milliseconds(10));
  REQUIRE(r.add(t));
  auto rtext = write_plan(r).value();
  REQUIRE(read_plan(rtext));
  CHECK(write_plan(read_plan(rtext).value()).value() == rtext);
}

TEST_CASE("a step tree deeper than max_step_depth is refused, naming the limit and the pointer", "[plan]") {
  std::string step_json = R"({"nets": ["n"]})";
  for (std::size_t i = 1; i <= max_step_depth; ++i) step_json = R"({"substeps": [)" + step_json + "]}";
  std::string pointer = "/tasks/0/step";
  for (std::size_t i = 1; i <= max_step_depth; ++i) pointer += "/substeps/0";
  CHECK(limits_read_error(with_step(step_json)) ==
        pointer + ": steps nest deeper than taskgroup::max_step_depth (1000 levels)");
  // Far deeper JSON stops in the parser, which says what the limit is.
  std::string deep(5000, '[');
  CHECK_THAT(limits_read_error(R"({"taskgroup_plan": 1, "x": )" + deep),
             Catch::Contains("nested deeper than 2008 levels (a step tree holds at most taskgroup::max_step_depth = "
                             "1000 levels)"));
}

// Boost.JSON's parser recurses once per nesting level (2 per step level):
// about 100 bytes a level when optimized, several times that in an
// unoptimized AddressSanitizer build or a ThreadSanitizer build, which get a
// larger stack here. The taskgroup code itself walks step trees and
// documents with explicit stacks.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::size_t small_stack = 2048 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr std::size_t small_stack = 2048 * 1024;
#else
constexpr std::size_t small_stack = 256 * 1024;
#endif
#else
constexpr std::size_t small_stack = 256 * 1024;
#endif

TEST_CASE("reading and writing the deepest plan fits a 256 KiB stack", "[plan]") {
  task_group g;
  REQUIRE(g.add(task("deep", chain(max_step_depth))));
  std::string text, again;
  std::optional<task_group> back;
  on_small_stack(small_stack, [&] {
    text = write_plan(g).value();
    auto r = read_plan(text);
    if (r) {
      again = write_plan(r.value()).value();
      back = std::move(r).value();  // destroyed on this thread's caller
    }
  });
  REQUIRE(back);
  CHECK(again == text);
}

TEST_CASE("the regression corpus keeps the round-trip property", "[.plan_corpus]") {
  const char* dir = std::getenv("TASKGROUP_PLAN_CORPUS");
  REQUIRE(dir != nullptr);
  std::size_t inputs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(e.path().string());
    CHECK(plan_round_trip_fault(text).empty());
    ++inputs;
  }
  CHECK(inputs > 0);
}
