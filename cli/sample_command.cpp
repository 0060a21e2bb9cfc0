#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/exported_model.h"
#include "cli/plugins.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/settings.h"
#include "tasks/language_model.h"
#include "tasks/models/gpt.h"
#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::cli {
namespace {

// The defaults of nanoGPT's sample.py but for the length (its 500 tokens, here 200).
struct SampleFlags {
  std::string run;
  std::string prompt = "\n";
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 200;
  uint64_t seed = 1337;
  std::vector<std::string> plugins;  // a plugin task's run needs its plugin
};

void checkFlags(const SampleFlags& flags) {
  if (flags.tokens < 1) throw UserError("--tokens " + std::to_string(flags.tokens) + ": must be at least 1");
  if (!(flags.temperature > 0)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", flags.temperature);
    throw UserError(std::string("--temperature ") + value + ": must be above 0 (1: the model's own " +
                    "distribution; lower: more likely tokens)");
  }
  if (flags.top_k < 1) throw UserError("--top-k " + std::to_string(flags.top_k) + ": must be at least 1");
}

// The run's GPT as `gcrun export` takes it out (exportedModel: θ_g, the replicas' mean or rank 0's),
// loaded into gcrun's own GPT of the run's settings.
std::unique_ptr<tasks::models::GptModel> sampledModel(const std::string& run, const ExperimentConfig& config,
                                                      const tasks::LanguageModelFacts& facts) {
  const auto exported = exportedModel(run, config);
  std::map<std::string, at::Tensor> tensors(exported.tensors.begin(), exported.tensors.end());
  const auto settings = tasks::languageModelSettings().read(config.task.settings);
  const auto wte = tensors.find(facts.token_embedding);
  const auto wpe = tensors.find("transformer.wpe.weight");
  if (wte == tensors.end() || wpe == tensors.end() || wte->second.dim() != 2 || wpe->second.dim() != 2) {
    throw UserError(run + ": corrupt checkpoint: it holds no GPT embeddings (" + facts.token_embedding +
                    ", transformer.wpe.weight)");
  }
  tasks::models::GptShape shape{wte->second.size(0),
                                wpe->second.size(0),
                                settings.layers,
                                settings.heads,
                                wte->second.size(1),
                                settings.bias,
                                0.0};
  auto model = std::make_unique<tasks::models::GptModel>(shape, 0);
  torch::NoGradGuard no_grad;
  for (auto& parameter : model->named_parameters()) {
    const auto found = tensors.find(parameter.key());
    if (found == tensors.end() || !found->second.sizes().equals(parameter.value().sizes())) {
      throw UserError(run + ": corrupt checkpoint: parameter '" + parameter.key() +
                      "' is missing or not of the shape the run's settings give");
    }
    parameter.value().copy_(found->second);
  }
  model->eval();
  return model;
}

// nanoGPT's generate(): the context cropped to the model's, the last position's logits divided by
// the temperature, all but the top k set to -inf, softmax, one draw from `generator`.
int64_t nextToken(tasks::models::GptModel& model, const std::vector<int64_t>& ids, const SampleFlags& flags,
                  at::Generator& generator) {
  const auto context = static_cast<size_t>(model.shape().context);
  const size_t begin = ids.size() > context ? ids.size() - context : 0;
  const auto input = torch::tensor(std::vector<int64_t>(ids.begin() + begin, ids.end()), torch::kInt64).view({1, -1});
  auto logits = model.forward(input).select(1, -1) / flags.temperature;
  const int64_t k = std::min(flags.top_k, logits.size(-1));
  const auto kth = std::get<0>(logits.topk(k)).select(1, -1).unsqueeze(1);
  logits.masked_fill_(logits < kth, -std::numeric_limits<double>::infinity());
  const auto probabilities = at::softmax(logits, -1);
  return at::multinomial(probabilities, 1, false, generator).item<int64_t>();
}

// Model output is data: it may hold any byte, and must not drive the terminal. Line breaks and tabs
// pass; every other control byte, and bytes that are not UTF-8, are shown as escapes (oneLine).
std::string terminalText(const std::string& text) {
  std::string out;
  size_t begin = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n' && text[i] != '\t') continue;
    out += oneLine(text.substr(begin, i - begin));
    if (i < text.size()) out += text[i];
    begin = i + 1;
  }
  return out;
}

// Prints a growing text as it grows: what is new since the last call. The last up to 3 bytes of a
// multi-byte character not yet complete wait for the next call, so that no escape splits it.
class StreamedText {
 public:
  void show(const std::string& text, bool last) {
    size_t end = text.size();
    while (!last && end > 0 && text.size() - end < 3 && (static_cast<unsigned char>(text[end - 1]) & 0x80)) --end;
    const std::string shown = terminalText(text.substr(0, end));
    if (shown.compare(0, printed_.size(), printed_) != 0 || shown.size() <= printed_.size()) return;
    std::fwrite(shown.data() + printed_.size(), 1, shown.size() - printed_.size(), stdout);
    std::fflush(stdout);
    printed_ = shown;
  }
  bool endsLine() const { return printed_.empty() || printed_.back() == '\n'; }

 private:
  std::string printed_;
};

// Without a tokenizer the prompt is token ids, separated by whitespace; none: the sample starts from id 0.
std::vector<int64_t> promptIds(const std::string& prompt, int64_t vocabulary) {
  std::vector<int64_t> ids;
  std::istringstream words(prompt);
  std::string word;
  while (words >> word) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
    }
    if (used != word.size() || id < 0 || id >= vocabulary) {
      throw UserError("--prompt: '" + clipForMessage(word, 40) + "' is not a token id of this run (0 to " +
                      std::to_string(vocabulary - 1) + "); its data has no text form, so the prompt is ids");
    }
    ids.push_back(id);
  }
  if (ids.empty()) ids.push_back(0);
  return ids;
}

// The run's tokenizer, or none when its data has no text form (synthetic or pre-tokenized ids).
std::unique_ptr<tasks::Tokenizer> runTokenizer(const ExperimentConfig& config, const tasks::LanguageModelFacts& facts) {
  const auto found = config.task.settings.find(facts.level_setting);
  const std::string level = found == config.task.settings.end() ? "" : hyperparams::formatSetting(found->second);
  const char* why = config.task.synthetic                         ? "the run trained on synthetic data"
                    : !tasks::tokenizerRegistry().contains(level) ? "its task.level has no tokenizer"
                                                                  : nullptr;
  if (why == nullptr) return tasks::tokenizerRegistry().at(level).factory(config.task);
  std::fprintf(stderr, "gcrun sample: %s, so the prompt and the sample are token ids, space-separated\n", why);
  return nullptr;
}

void runSample(const SampleFlags& flags) {
  checkFlags(flags);
  loadPlugins(flags.plugins);
  const auto settings = runSettings(flags.run);
  const auto& config = settings.config;
  const auto facts = languageModelFacts(config);
  if (!facts || config.task.architecture != "gpt") {
    throw UserError(flags.run + ": gcrun sample takes a run of a GPT language model (task.architecture gpt of a " +
                    "language-model task); this run's task is " + config.task.name + " (architecture " +
                    config.task.architecture + ")");
  }
  const auto tokenizer = runTokenizer(config, *facts);
  auto model = sampledModel(flags.run, config, *facts);
  std::vector<int64_t> ids =
      tokenizer ? tokenizer->encode(flags.prompt) : promptIds(flags.prompt, model->shape().vocabulary);
  if (ids.empty()) throw UserError("--prompt: the text gives no tokens; give at least one");
  auto text = [&] {
    if (tokenizer) return tokenizer->decode(ids);
    std::string out;
    for (const int64_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
    return out;
  };
  at::Generator generator = at::detail::createCPUGenerator(flags.seed);
  torch::NoGradGuard no_grad;
  StreamedText out;
  out.show(text(), false);
  for (int64_t i = 0; i < flags.tokens; ++i) {
    ids.push_back(nextToken(*model, ids, flags, generator));
    out.show(text(), i + 1 == flags.tokens);
  }
  if (!out.endsLine()) std::fputc('\n', stdout);
}

}  // namespace

void addSampleCommand(CLI::App& app) {
  auto flags = std::make_shared<SampleFlags>();
  auto* command = app.add_subcommand("sample", "Text from a trained GPT run's model, streamed (docs/sample.md)");
  command->add_option("run", flags->run, "The run directory (gcrun experiment's --output-dir)")->required();
  command->add_option("--prompt", flags->prompt,
                      "The text the sample continues, printed first (default: a line break)");
  command->add_option("--tokens", flags->tokens, "How many tokens to draw")->capture_default_str();
  command->add_option("--temperature", flags->temperature, "Divides the logits: below 1 more likely tokens")
      ->capture_default_str();
  command->add_option("--top-k", flags->top_k, "Draw among the k most likely tokens only")->capture_default_str();
  command->add_option("--seed", flags->seed, "Seeds the draws: the same seed, the same sample")->capture_default_str();
  addPluginOption(*command, flags->plugins);
  command->callback([flags] { runSample(*flags); });
}

}  // namespace gcrun::cli
