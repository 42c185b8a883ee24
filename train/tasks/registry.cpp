// The tasks a run can name, in one table: the one place where a name becomes a task
// (`train --task NAME`, a checkpoint config's "task" key, `eval --task`). Adding a task is
// its class and one row here.
#include <fmt/format.h>

#include "train/tasks/chat.h"
#include "train/tasks/classify.h"
#include "train/tasks/instruct.h"
#include "train/tasks/language_model.h"

namespace train {

namespace {

const std::vector<const Task*>& registry() {
  static const LanguageModelTask lm;
  static const ClassifyTask classify;
  static const InstructTask instruct;
  static const ChatTask chat;
  static const std::vector<const Task*> rows = {&lm, &classify, &instruct, &chat};
  return rows;
}

}  // namespace

const Task& task_named(const std::string& name) {
  for (const Task* task : registry())
    if (name == task->name()) return *task;
  throw std::invalid_argument(base::choice_error("task", task_names(), name));
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const Task* task : registry()) names.emplace_back(task->name());
  return names;
}

std::string tasks_help() {
  std::vector<std::string> rows;
  for (const Task* task : registry())
    rows.push_back(fmt::format("{} ({})", task->name(), task->help()));
  const std::string last = rows.back();
  rows.pop_back();
  return fmt::format("{} or {}", fmt::join(rows, ", "), last);
}

TaskHandle::TaskHandle() : task_(registry().front()) {}

const char* TaskHandle::name() const {
  return task_->name();
}

}  // namespace train
