#include <memory>

#include "tasks/language_model.h"
#include "tasks/tokenizers/sentencepiece_tokenizer.h"
#include "tasks/tokenizers/text_tokenizers.h"
#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::tasks {

Registry<TokenizerFactory>& tokenizerRegistry() {
  static Registry<TokenizerFactory> registry = [] {
    Registry<TokenizerFactory> builtins("tokenizer level");
    builtins.add("char", "every byte a token, numbered by rank among the distinct bytes of the data's files",
                 makeCharacterTokenizer);
    builtins.add("word", "WikiText's whitespace-separated words of the training file, lower-cased; <eos> per line",
                 makeWordTokenizer);
    builtins.add("sentencepiece", "the SentencePiece model file task.tokenizer names", [](const TaskOptions& options) {
      return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(
          requireTokenizerFile(languageModelSettings().read(options.settings))));
    });
    return builtins;
  }();
  return registry;
}

}  // namespace gcrun::tasks
