#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tasks/language_model.h"
#include "tasks/tokenizers/sentencepiece_tokenizer.h"
#include "tasks/tokenizers/text_tokenizers.h"
#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::tasks {
namespace {

// The process's shared SentencePiece tokenizer (sharedSentencePieceTokenizer) behind the
// registry's unique_ptr: the run has usually loaded the model already for its vocabulary.
class SharedTokenizer : public Tokenizer {
 public:
  explicit SharedTokenizer(std::shared_ptr<const Tokenizer> inner) : inner_(std::move(inner)) {}
  int64_t vocabularySize() const override { return inner_->vocabularySize(); }
  std::vector<int64_t> encode(const std::string& text) const override { return inner_->encode(text); }
  std::string decode(const std::vector<int64_t>& ids) const override { return inner_->decode(ids); }

 private:
  std::shared_ptr<const Tokenizer> inner_;
};

}  // namespace

Registry<TokenizerFactory>& tokenizerRegistry() {
  static Registry<TokenizerFactory> registry = [] {
    Registry<TokenizerFactory> builtins("tokenizer level");
    builtins.add("char", "every byte a token, numbered by rank among the distinct bytes of the data's files",
                 makeCharacterTokenizer);
    builtins.add("word", "WikiText's whitespace-separated words of the training file, lower-cased; <eos> per line",
                 makeWordTokenizer);
    builtins.add("sentencepiece", "the SentencePiece model file task.tokenizer names", [](const TaskOptions& options) {
      return std::unique_ptr<Tokenizer>(std::make_unique<SharedTokenizer>(
          sharedSentencePieceTokenizer(requireTokenizerFile(languageModelSettings().read(options.settings)))));
    });
    return builtins;
  }();
  return registry;
}

}  // namespace gcrun::tasks
