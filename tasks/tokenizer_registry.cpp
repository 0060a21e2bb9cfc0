#include <memory>

#include "tasks/language_model.h"
#include "tasks/tokenizers/sentencepiece_tokenizer.h"
#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::tasks {

Registry<TokenizerFactory>& tokenizerRegistry() {
  static Registry<TokenizerFactory> registry = [] {
    Registry<TokenizerFactory> builtins("tokenizer");
    builtins.add("sentencepiece", "the SentencePiece model file task.tokenizer names", [](const TaskOptions& options) {
      return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(
          requireTokenizerFile(languageModelSettings().read(options.settings))));
    });
    return builtins;
  }();
  return registry;
}

}  // namespace gcrun::tasks
