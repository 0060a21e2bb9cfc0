// A plugin's task that is a language model, as a user's own would be: the built-in language-model
// task registered again under another name, its registration (and so what it declares of its
// model, TaskSpec::language_model) copied. gcrun export and sample must treat it as they treat the
// built-in one, by what it declares rather than by its name.
#include "tasks/task.h"

extern "C" void gcrun_register() {
  auto& tasks = gcrun::tasks::taskRegistry();
  tasks.add("plugin-language-model", "the language-model task, registered by a plugin",
            tasks.at("language-model").factory);
}
