#include "jinja/chat_template.h"

#include <algorithm>
#include <ctime>

namespace tern {
namespace {

struct BuiltinTemplate {
  const char* name;
  const char* source;
};

// Written from the published prompt formats of each model family.
const BuiltinTemplate kBuiltins[] = {
    {"chatml",
     "{% for m in messages %}"
     "{{ '<|im_start|>' ~ m['role'] ~ '\\n' ~ m['content'] ~ '<|im_end|>\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama2",
     "{% set ns = namespace(system='') %}"
     "{% for m in messages %}"
     "{% if m['role'] == 'system' %}{% set ns.system = m['content'] %}"
     "{% elif m['role'] == 'user' %}"
     "{% set text = m['content'] %}"
     "{% if ns.system %}{% set text = '<<SYS>>\\n' ~ ns.system ~ '\\n<</SYS>>\\n\\n' ~ text %}"
     "{% set ns.system = '' %}{% endif %}"
     "{{ bos_token ~ '[INST] ' ~ text | trim ~ ' [/INST]' }}"
     "{% elif m['role'] == 'assistant' %}{{ ' ' ~ m['content'] | trim ~ ' ' ~ eos_token }}"
     "{% endif %}"
     "{% endfor %}"},
    {"llama3",
     "{{ bos_token }}"
     "{% for m in messages %}"
     "{{ '<|start_header_id|>' ~ m['role'] ~ '<|end_header_id|>\\n\\n' ~ m['content'] | trim ~ '<|eot_id|>' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    {"mistral",
     "{% set ns = namespace(system='') %}"
     "{{ bos_token }}"
     "{% for m in messages %}"
     "{% if m['role'] == 'system' %}{% set ns.system = m['content'] %}"
     "{% elif m['role'] == 'user' %}"
     "{% set text = m['content'] %}"
     "{% if ns.system %}{% set text = ns.system ~ '\\n\\n' ~ text %}{% set ns.system = '' %}{% endif %}"
     "{{ '[INST] ' ~ text ~ ' [/INST]' }}"
     "{% elif m['role'] == 'assistant' %}{{ m['content'] ~ eos_token }}"
     "{% endif %}"
     "{% endfor %}"},
    {"phi3",
     "{% for m in messages %}"
     "{{ '<|' ~ m['role'] ~ '|>\\n' ~ m['content'] ~ '<|end|>\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
    {"gemma",
     "{% set ns = namespace(system='') %}"
     "{{ bos_token }}"
     "{% for m in messages %}"
     "{% if m['role'] == 'system' %}{% set ns.system = m['content'] | trim %}"
     "{% else %}"
     "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
     "{% set text = m['content'] | trim %}"
     "{% if ns.system and role == 'user' %}{% set text = ns.system ~ '\\n\\n' ~ text %}{% set ns.system = '' %}{% endif %}"
     "{{ '<start_of_turn>' ~ role ~ '\\n' ~ text ~ '<end_of_turn>\\n' }}"
     "{% endif %}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
    {"zephyr",
     "{% for m in messages %}"
     "{{ '<|' ~ m['role'] ~ '|>\\n' ~ m['content'] ~ eos_token ~ '\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
};

Value RaiseExceptionFunction() {
  return Value::MakeFunction("raise_exception", [](const CallArgs& args) -> StatusOr<Value> {
    std::string message = args.positional.empty() ? "raise_exception() called"
                                                   : args.positional[0].ToString();
    return InvalidArgument(message);
  });
}

Value StrftimeNowFunction() {
  return Value::MakeFunction("strftime_now", [](const CallArgs& args) -> StatusOr<Value> {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return InvalidArgument("strftime_now() needs a format string");
    }
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[512];
    size_t n = std::strftime(buf, sizeof(buf), args.positional[0].string_value().c_str(), &local);
    return Value(std::string(buf, n));
  });
}

}  // namespace

TemplateOptions ChatTemplateOptions() {
  TemplateOptions options;
  options.trim_blocks = true;
  options.lstrip_blocks = true;
  return options;
}

StatusOr<Template> ParseChatTemplate(const std::string& template_source) {
  return Template::Parse(template_source, ChatTemplateOptions());
}

StatusOr<std::string> RenderChatTemplate(const Template& chat_template,
                                         const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, const Value& tools) {
  ValueList list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    ValueDict d = {{"role", Value(m.role)}, {"content", Value(m.content)}};
    for (const auto& entry : m.extra) {
      const std::string& key = entry.first;
      const Value& v = entry.second;
      auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == key; });
      if (it != d.end()) {
        it->second = v;
      } else {
        d.emplace_back(key, v);
      }
    }
    list.push_back(Value::Dict(std::move(d)));
  }
  ValueDict context_items = {
      {"messages", Value::List(std::move(list))},
      {"add_generation_prompt", Value(add_generation_prompt)},
      {"bos_token", Value(bos_token)},
      {"eos_token", Value(eos_token)},
      {"raise_exception", RaiseExceptionFunction()},
      {"strftime_now", StrftimeNowFunction()},
  };
  if (!tools.is_undefined()) context_items.emplace_back("tools", tools);
  return chat_template.Render(Value::Dict(std::move(context_items)));
}

StatusOr<std::string> RenderChatTemplate(const std::string& template_source,
                                         const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, const Value& tools) {
  TERN_ASSIGN_OR_RETURN(Template parsed, ParseChatTemplate(template_source));
  return RenderChatTemplate(parsed, messages, add_generation_prompt, bos_token, eos_token, tools);
}

std::optional<std::string> BuiltinChatTemplate(std::string_view name) {
  for (const BuiltinTemplate& t : kBuiltins) {
    if (name == t.name) return std::string(t.source);
  }
  return std::nullopt;
}

std::vector<std::string> BuiltinChatTemplateNames() {
  std::vector<std::string> names;
  for (const BuiltinTemplate& t : kBuiltins) names.emplace_back(t.name);
  return names;
}

}  // namespace tern
