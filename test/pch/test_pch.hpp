// Precompiled header of the test binary: the heavy third-party headers.
#include <boost/asio.hpp>
#include <boost/outcome/basic_result.hpp>
#include <catch2/catch.hpp>
