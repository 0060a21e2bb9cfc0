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
    return builtins;
  }();
  return registry;
}

}  // namespace gcrun::tasks
