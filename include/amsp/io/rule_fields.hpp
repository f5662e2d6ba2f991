#pragma once
// What a checkpoint records of an update rule: its hyperparameters as named fields and the names
// of its states. One visitor per rule lists the fields; saving, loading and the amsp-ckpt tool
// all walk it, so adding a field (a per-group option, say) is one more line here.
//
//   checkpoint_fields(rule, [](std::string_view name, auto& value) { ... });  // float or bool
//   checkpoint_state_names(rule)   // AdamW: {"exp_avg", "exp_avg_sq"} (PyTorch's names)

#include <array>
#include <charconv>
#include <system_error>
#include <string>
#include <string_view>
#include <type_traits>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/lion.hpp"
#include "amsp/optim/sgd_momentum.hpp"

namespace amsp::io {

/// True when Rule (const or not) is T: each rule's visitor takes both, so one list of fields serves
/// reading (const) and restoring (mutable).
template <class Rule, class T>
concept rule_of_type = std::is_same_v<std::remove_const_t<Rule>, T>;

template <class Rule, class Visit>
  requires rule_of_type<Rule, optim::AdamW> || rule_of_type<Rule, optim::Adam>
void checkpoint_fields(Rule& r, Visit&& visit) {
  visit("lr", r.lr);
  visit("beta1", r.beta1);
  visit("beta2", r.beta2);
  visit("eps", r.eps);
  visit("weight_decay", r.weight_decay);
}

template <class Rule, class Visit>
  requires rule_of_type<Rule, optim::SgdMomentum>
void checkpoint_fields(Rule& r, Visit&& visit) {
  visit("lr", r.lr);
  visit("momentum", r.momentum);
  visit("dampening", r.dampening);
  visit("weight_decay", r.weight_decay);
  visit("nesterov", r.nesterov);
}

template <class Rule, class Visit>
  requires rule_of_type<Rule, optim::Lion>
void checkpoint_fields(Rule& r, Visit&& visit) {
  visit("lr", r.lr);
  visit("beta1", r.beta1);
  visit("beta2", r.beta2);
  visit("weight_decay", r.weight_decay);
}

/// A parameter group's options (EngineOptions::param_groups), saved per tensor.
template <class Group, class Visit>
  requires rule_of_type<Group, ParamGroup>
void checkpoint_fields(Group& g, Visit&& visit) {
  visit("lr_scale", g.lr_scale);
  visit("weight_decay", g.weight_decay);
}

template <bool Decoupled>
constexpr std::array<std::string_view, 2> checkpoint_state_names(const optim::AdamRule<Decoupled>&) {
  return {"exp_avg", "exp_avg_sq"};
}
constexpr std::array<std::string_view, 1> checkpoint_state_names(const optim::SgdMomentum&) {
  return {"momentum_buffer"};
}
constexpr std::array<std::string_view, 1> checkpoint_state_names(const optim::Lion&) { return {"exp_avg"}; }

/// The double whose shortest decimal form is the float's (0.001f -> 0.001, not 0.0010000000474974513)
/// when it converts back to exactly the same float; the float's exact value otherwise.
[[nodiscard]] inline double readable_double(float value) {
  char text[32];
  const auto written = std::to_chars(text, text + sizeof text, value);
  double shortest = 0;
  const auto read = std::from_chars(text, written.ptr, shortest);
  const bool exact = written.ec == std::errc{} && read.ec == std::errc{} && static_cast<float>(shortest) == value;
  return exact ? shortest : static_cast<double>(value);
}

/// The fields of a rule (or a parameter group) as a JSON object (field name -> number or boolean).
template <class Rule>
[[nodiscard]] Json rule_fields_to_json(const Rule& rule) {
  Json fields = Json::object();
  checkpoint_fields(rule, [&](std::string_view name, const auto& value) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, bool>) fields[name] = value;
    else fields[name] = readable_double(value);
  });
  return fields;
}

/// A rule with every field read from `fields` (as written by rule_fields_to_json); a missing,
/// extra or mistyped field fails with ckpt.rule_mismatch, an out-of-range value with the rule's own
/// optim.hyperparameter.
template <class Rule>
[[nodiscard]] Rule rule_from_json(const Json& fields) {
  check(fields.is_object(), "ckpt.rule_mismatch", "the rule's hyperparameters must be a JSON object");
  Rule rule{};
  std::size_t visited = 0;
  checkpoint_fields(rule, [&](std::string_view name, auto& value) {
    const Json* v = fields.find(name);
    check(v != nullptr, "ckpt.rule_mismatch", "the checkpoint lacks hyperparameter '", name, "' of rule ", Rule::name);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, bool>) {
      check(v->is_bool(), "ckpt.rule_mismatch", "hyperparameter '", name, "' must be a boolean");
      value = v->as_bool();
    } else {
      check(v->is_number(), "ckpt.rule_mismatch", "hyperparameter '", name, "' must be a number");
      value = static_cast<std::remove_cvref_t<decltype(value)>>(v->as_number());
    }
    ++visited;
  });
  check(visited == fields.as_object().size(), "ckpt.rule_mismatch", "the checkpoint has ",
        fields.as_object().size(), " hyperparameters but rule ", Rule::name, " has ", visited);
  rule.validate();
  return rule;
}

}  // namespace amsp::io
