// A plan's top-level members, from a document or from text.
#include "plan/internal.hpp"

#include <algorithm>
#include <deque>

namespace taskgroup::plan_detail {

namespace {

class document_view final : public plan_members {
 public:
  explicit document_view(const json::object& o) noexcept : o_(o) {}

  [[nodiscard]] std::vector<std::string_view> keys() const override {
    std::vector<std::string_view> out;
    out.reserve(o_.size());
    for (const auto& kv : o_) out.emplace_back(kv.key());
    return out;
  }
  [[nodiscard]] bool has(std::string_view key) const override { return o_.contains(key); }
  result<const json::value*> value(std::string_view key) override { return o_.if_contains(key); }
  status each(std::string_view key, const element_fn& f) override {
    const json::value* v = o_.if_contains(key);
    if (v == nullptr) return ok();
    TASKGROUP_TRY(auto arr, get_array(*v, child(document_root, key)));
    for (std::size_t i = 0; i < arr->size(); ++i) {
      TASKGROUP_TRY(f((*arr)[i], i));
    }
    return ok();
  }

 private:
  const json::object& o_;
};

class text_view final : public plan_members {
 public:
  text_view(std::string_view text, outline found) : text_(text), found_(std::move(found)) {}

  [[nodiscard]] std::vector<std::string_view> keys() const override {
    std::vector<std::string_view> out;
    out.reserve(found_.members.size());
    for (const auto& [k, at] : found_.members) out.emplace_back(k);
    return out;
  }
  [[nodiscard]] bool has(std::string_view key) const override { return find(key) != nullptr; }
  result<const json::value*> value(std::string_view key) override {
    const std::size_t* at = find(key);
    if (at == nullptr) return nullptr;
    TASKGROUP_TRY(auto doc, parse_value_at(text_, *at));
    parsed_.push_back(std::move(doc));
    return &parsed_.back().v;
  }
  status each(std::string_view key, const element_fn& f) override {
    const std::size_t* at = find(key);
    if (at == nullptr) return ok();
    if (text_[*at] != '[') {  // not an array: the error as a document would give it
      TASKGROUP_TRY(auto v, value(key));
      return get_array(*v, child(document_root, key)).error();
    }
    return each_element(text_, *at, f);
  }

 private:
  [[nodiscard]] const std::size_t* find(std::string_view key) const noexcept {
    auto it = std::find_if(found_.members.begin(), found_.members.end(), [&](const auto& m) { return m.first == key; });
    return it == found_.members.end() ? nullptr : &it->second;
  }

  std::string_view text_;
  outline found_;
  std::deque<document> parsed_;  // the values handed out
};

}  // namespace

result<std::unique_ptr<plan_members>> document_members(const json::value& root) {
  TASKGROUP_TRY(auto o, get_object(root, document_root));
  return std::unique_ptr<plan_members>(std::make_unique<document_view>(*o));
}

std::unique_ptr<plan_members> text_members(std::string_view text, outline found) {
  return std::make_unique<text_view>(text, std::move(found));
}

}  // namespace taskgroup::plan_detail
