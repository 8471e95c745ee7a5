// taskgroup command: op libraries (--load) and the listing of registered
// operators (`taskgroup ops`).
//
// The JSON shape of `taskgroup ops --json` (stable; docs/command.md,
// "Listing the operators"):
//
//   {"operators": [            // every registered type, sorted by type
//     {"type": "Repeat",
//      "doc": "...",          // the schema's doc ("" when it has none)
//      "inputs":  {"min": 1, "max": 1},     // max null: unbounded
//      "outputs": {"min": 1, "max": 1},
//      "async": false,        // its kernel is awaited (asynchronous)
//      "any_args": false,     // undeclared arguments are accepted
//      "library": "strings.so",             // the --load path; null: built in
//      "arguments": [         // in declaration order
//        {"name": "times", "kinds": ["int64"], "required": false,
//         "default": 2,       // plain JSON of the default; null: none
//         "doc": "..."}]}]}
//
// Threading: `load_libraries` registers into the global registry (itself
// thread-safe); the listings are pure functions.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/op_library.hpp>
#include <taskgroup/operator.hpp>

#include <boost/json/value.hpp>

#include <string>
#include <vector>

namespace taskgroup::cli {

/// Loads every library of `paths`, in order, into
/// `operator_registry::global()`. Errors: the first library's that fails
/// (load_op_library's, naming the file and the operator); the libraries
/// before it stay loaded.
result<std::vector<op_library>> load_libraries(const std::vector<std::string>& paths);

/// Every operator of `registry` in the JSON shape above; `libraries` tells
/// which types came from which file.
boost::json::value operators_json(const operator_registry& registry, const std::vector<op_library>& libraries);

/// The same as text: one block per type, `Type  IN -> OUT[, async]
/// [(from FILE)]`, its doc, then one line per argument (`name  kinds,
/// required | default VALUE | optional  doc`).
std::string operators_text(const operator_registry& registry, const std::vector<op_library>& libraries);

}  // namespace taskgroup::cli
