#include <taskgroup/workspace.hpp>

#include <taskgroup/net.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

using namespace taskgroup;
using i64 = std::int64_t;

TEST_CASE("lookup goes through the parent chain", "[workspace]") {
  auto root = workspace::make("root");
  root->set("a", i64{1});
  auto child = root->create_child("child");
  auto grandchild = child->create_child("grandchild");
  CHECK(grandchild->has("a"));
  CHECK(*grandchild->get<i64>("a").value() == 1);
  CHECK(grandchild->find("a") == root->find("a"));
  CHECK_FALSE(grandchild->has("missing"));
}

TEST_CASE("create returns the visible blob, even the parent's", "[workspace]") {
  auto root = workspace::make("root");
  blob& parent_blob = root->create("x");
  auto child = root->create_child("child");
  blob& seen = child->create("x");
  CHECK(&seen == &parent_blob);
  CHECK(child->local_blobs().empty());
  child->create("y");
  CHECK(child->local_blobs() == std::vector<std::string>{"y"});
  CHECK_FALSE(root->has("y"));
}

TEST_CASE("create_local shadows the parent's blob", "[workspace]") {
  auto root = workspace::make("root");
  root->set("x", i64{1});
  auto child = root->create_child("child");
  child->create_local("x").set(i64{2});
  CHECK(*child->get<i64>("x").value() == 2);
  CHECK(*root->get<i64>("x").value() == 1);
}

TEST_CASE("remove removes local blobs only", "[workspace]") {
  auto root = workspace::make("root");
  root->set("x", i64{1});
  auto child = root->create_child("child");
  CHECK_FALSE(child->remove("x"));
  CHECK(root->has("x"));
  child->set("y", i64{2});
  CHECK(child->remove("y"));
  CHECK_FALSE(child->has("y"));
}

TEST_CASE("blobs lists local, forwarded, then parent names; local_blobs only local", "[workspace]") {
  auto root = workspace::make("root");
  root->create("p");
  root->create("x");
  auto other = workspace::make("other");
  other->create("o");
  auto child = root->create_child("child");
  child->create_local("x");
  child->create("c");
  REQUIRE(child->forward("alias", *other, "o"));
  CHECK(child->blobs() == std::vector<std::string>{"c", "x", "alias", "p", "x"});
  CHECK(child->local_blobs() == std::vector<std::string>{"c", "x"});
  CHECK(child->find("alias") == other->find("o"));
}

TEST_CASE("forwarding a blob that does not exist fails naming it", "[workspace]") {
  auto a = workspace::make("a");
  auto b = workspace::make("b");
  auto st = a->forward("x", *b, "nope");
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::blob_not_found);
  CHECK(st.error().message == "workspace \"b\": blob \"nope\" does not exist");
}

TEST_CASE("typed reads name the workspace, blob, expected and actual type", "[workspace]") {
  auto ws = workspace::make("node1");
  ws->set("x", 1.5);
  auto r = ws->get<i64>("x");
  REQUIRE(r.has_error());
  CHECK(r.error().code == errc::type_mismatch);
  CHECK(r.error().message == "workspace \"node1\": blob \"x\": expected int64, got double");
  ws->create("empty");
  CHECK(ws->read<i64>("empty").error().code == errc::blob_empty);
  auto missing = ws->read<i64>("nope");
  CHECK(missing.error().code == errc::blob_not_found);
  CHECK(missing.error().message == "workspace \"node1\": blob \"nope\" does not exist");
}

TEST_CASE("nets are not inherited by child workspaces", "[workspace][net]") {
  auto root = workspace::make("root");
  net n("init");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{3}}});
  REQUIRE(root->create_net(n));
  auto child = root->create_child("child");
  CHECK(root->find_net("init") != nullptr);
  CHECK(child->find_net("init") == nullptr);
  CHECK(root->nets() == std::vector<std::string>{"init"});
}

TEST_CASE("creating a net twice needs overwrite", "[workspace][net]") {
  auto ws = workspace::make("w");
  net n("init");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{3}}});
  REQUIRE(ws->create_net(n));
  auto again = ws->create_net(n);
  REQUIRE(again.has_error());
  CHECK(again.error().code == errc::net_exists);
  CHECK_THAT(again.error().message, Catch::Contains("net \"init\" already exists"));
  CHECK(ws->create_net(n, true));
  CHECK(ws->remove_net("init"));
  CHECK_FALSE(ws->remove_net("init"));
}

TEST_CASE("an op in a child writes the parent's blob when it was visible at binding", "[workspace][net]") {
  auto root = workspace::make("root");
  root->set("x", i64{1});
  auto child = root->create_child("child");
  net n("body");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{5}}});
  n.op("ConstantFill", {}, {"fresh"}, {{"value", i64{6}}});
  auto inst = child->create_net(n).value();
  REQUIRE(inst->run_sync());
  CHECK(*root->get<i64>("x").value() == 5);
  CHECK(child->local_blobs() == std::vector<std::string>{"fresh"});
  CHECK_FALSE(root->has("fresh"));
}

TEST_CASE("a blob bound by a net exists without a value", "[workspace][net]") {
  auto ws = workspace::make("w");
  net n("n");
  n.op("Fail", {}, {}, {{"message", std::string("never run")}});
  n.op("Copy", {"x"}, {"y"});
  ws->create("x");
  REQUIRE(ws->create_net(n));
  REQUIRE(ws->has("y"));
  CHECK_FALSE(ws->find("y")->has_value());
}

TEST_CASE("a removed blob stays valid for nets already bound to it", "[workspace][net]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{1});
  net n("n");
  n.op("Copy", {"x"}, {"y"});
  auto inst = ws->create_net(n).value();
  CHECK(ws->remove("x"));
  REQUIRE(inst->run_sync());
  CHECK(*ws->get<i64>("y").value() == 1);
}

TEST_CASE("instance_of binds a net once per workspace, and again for a new net", "[workspace][net]") {
  const operator_registry& reg = operator_registry::global();
  auto ws = workspace::make("w");
  auto counter = [](const std::string& name) {
    net n(name);
    n.op("Iter", {}, {"count"});
    return n;
  };
  SECTION("the first net and the ones after it each keep one instance") {
    net a = counter("a");
    net b = counter("b");
    net c = counter("c");
    net_instance* ia = ws->instance_of(a, reg).value();
    net_instance* ib = ws->instance_of(b, reg).value();
    net_instance* ic = ws->instance_of(c, reg).value();
    CHECK(ia != ib);
    CHECK(ib != ic);
    CHECK(ws->instance_of(a, reg).value() == ia);
    CHECK(ws->instance_of(b, reg).value() == ib);
    CHECK(ws->instance_of(c, reg).value() == ic);
    net a_copy = a;  // copies of a net share its identity
    CHECK(ws->instance_of(a_copy, reg).value() == ia);
    CHECK(ia->name() == "a");
    CHECK(ic->name() == "c");
  }
  SECTION("a net that replaces a dead one gets a fresh instance, first or not") {
    for (int round = 0; round < 50; ++round) {
      // Nets die and are made again, often at the address of the last one:
      // an instance is never taken for another net's.
      net first = counter("first" + std::to_string(round));
      net second = counter("second" + std::to_string(round));
      net_instance* i1 = ws->instance_of(first, reg).value();
      net_instance* i2 = ws->instance_of(second, reg).value();
      CHECK(i1->name() == "first" + std::to_string(round));
      CHECK(i2->name() == "second" + std::to_string(round));
    }
  }
  SECTION("a binding error is returned and nothing is kept") {
    net bad("bad");
    bad.op("Copy", {"missing"}, {"y"});
    auto r = ws->instance_of(bad, reg);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("input blob \"missing\" does not exist"));
    ws->set("missing", i64{4});
    REQUIRE(ws->instance_of(bad, reg));
  }
}
