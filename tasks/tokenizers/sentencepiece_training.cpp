#include "tasks/tokenizers/sentencepiece_training.h"

#include <mutex>
#include <unordered_map>

#include "hyperparams/base/errors.h"
#include "tasks/tokenizers/sentencepiece_module.h"

namespace gcrun::tasks {
namespace {

int64_t utf8Characters(const std::string& text) {
  int64_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// The next non-empty sentence of `next` (empty ones teach nothing), counted.
SentenceSource counted(const SentenceSource& next, TrainedSentencePiece& counts) {
  return [&next, &counts](std::string& sentence) {
    do {
      if (!next(sentence)) return false;
    } while (sentence.empty());
    ++counts.sentences;
    counts.characters += utf8Characters(sentence);
    return true;
  };
}

}  // namespace

TrainedSentencePiece trainSentencePiece(const SentenceSource& next, const SentencePieceTraining& settings) {
  if (settings.model_type != "bpe" && settings.model_type != "unigram") {
    throw UserError("--model-type: '" + settings.model_type + "' is not a model type; it accepts: bpe, unigram");
  }
  const std::unordered_map<std::string, std::string> options = {
      {"vocab_size", std::to_string(settings.vocabulary)},
      {"model_type", settings.model_type},
      {"num_threads", "1"},
      {"input_sentence_size", std::to_string(kMaxTrainingSentences)},
      {"shuffle_input_sentence", "true"},
      {"minloglevel", "2"},  // its progress and warnings would fill the screen; its errors come back as a status
  };
  // SentencePiece's random generator is global: one training at a time, seeded.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  TrainedSentencePiece trained;
  std::string error;
  if (!sentencePiece().train(options, static_cast<unsigned>(settings.seed), counted(next, trained), trained.model,
                             error)) {
    throw UserError("--vocab-size " + std::to_string(settings.vocabulary) + " (--model-type " + settings.model_type +
                    "): SentencePiece could not train on " + std::to_string(trained.sentences) +
                    " sentences: " + error);
  }
  return trained;
}

}  // namespace gcrun::tasks
