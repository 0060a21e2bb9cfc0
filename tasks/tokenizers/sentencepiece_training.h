#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gcrun::tasks {

struct SentencePieceTraining {
  int64_t vocabulary = 4000;
  std::string model_type = "bpe";  // bpe or unigram
  uint64_t seed = 0;
};

struct TrainedSentencePiece {
  std::string model;  // the serialized model, what a .model file holds
  int64_t sentences = 0;
  int64_t characters = 0;  // UTF-8 characters of the sentences given
};

// Gives the next sentence in its argument; false after the last.
using SentenceSource = std::function<bool(std::string&)>;

// A SentencePiece model trained on the sentences of `next`, pulled one at a time through
// SentencePiece's SentenceIterator (no copy of the corpus on disk). Reproducible: one thread and
// SentencePiece's random generator seeded with `seed`, so the same sentences and settings give the
// same bytes. SentencePiece's own logging is silenced. It keeps at most kMaxTrainingSentences
// sentences (a seeded sample of a larger corpus) of at most 4,192 bytes each (longer ones skipped).
// A vocabulary the sentences cannot fill, or other settings SentencePiece refuses, are a UserError
// naming --vocab-size or what SentencePiece said.
TrainedSentencePiece trainSentencePiece(const SentenceSource& next, const SentencePieceTraining& settings);

inline constexpr int64_t kMaxTrainingSentences = 4000000;

}  // namespace gcrun::tasks
