// The module gcrun_sentencepiece: SentencePiece behind the table of sentencepiece_module.h. It
// links libsentencepiece and the C++ standard library only (no LibTorch, whose protobuf would clash).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "tasks/tokenizers/sentencepiece_module.h"

namespace gcrun::tasks {
namespace {

using sentencepiece::SentencePieceProcessor;

bool ok(const sentencepiece::util::Status& status, std::string& error) {
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::function<bool(std::string&)>& next) : next_(next) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !next_(sentence_); }
  const std::string& value() const override { return sentence_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::function<bool(std::string&)>& next_;
  std::string sentence_;
  bool done_ = false;
};

const SentencePieceProcessor& processorOf(const void* processor) {
  return *static_cast<const SentencePieceProcessor*>(processor);
}

const SentencePieceApi kApi = {
    [](const std::string& serialized, std::string& error) -> void* {
      auto processor = std::make_unique<SentencePieceProcessor>();
      return ok(processor->LoadFromSerializedProto(serialized), error) ? processor.release() : nullptr;
    },
    [](void* processor) { delete static_cast<SentencePieceProcessor*>(processor); },
    [](const void* processor) { return processorOf(processor).GetPieceSize(); },
    [](const void* processor) { return processorOf(processor).eos_id(); },
    [](const void* processor, const std::string& text, std::vector<int>& ids, std::string& error) {
      std::vector<int> pieces;
      if (!ok(processorOf(processor).Encode(text, &pieces), error)) return false;
      ids.insert(ids.end(), pieces.begin(), pieces.end());
      return true;
    },
    [](const void* processor, const std::vector<int>& ids, std::string& text, std::string& error) {
      return ok(processorOf(processor).Decode(ids, &text), error);
    },
    [](const std::unordered_map<std::string, std::string>& options, unsigned seed,
       const std::function<bool(std::string&)>& next, std::string& model, std::string& error) {
      sentencepiece::SetRandomGeneratorSeed(seed);
      Sentences sentences(next);
      return ok(sentencepiece::SentencePieceTrainer::Train(options, &sentences, &model), error);
    },
};

}  // namespace
}  // namespace gcrun::tasks

extern "C" const gcrun::tasks::SentencePieceApi* gcrun_sentencepiece_api() { return &gcrun::tasks::kApi; }
