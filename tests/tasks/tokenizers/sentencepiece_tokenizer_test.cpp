// SentencePiece in gcrun: a model trained from sentences pulled one at a time, reproducibly; the
// tokenizer's round trip (line breaks as end-of-sentence ids); a text file's ids in the type asked
// for; and model files that are missing, huge or not a model refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "tasks/tokenizers/sentencepiece_tokenizer.h"
#include "tasks/tokenizers/sentencepiece_training.h"
#include "tasks/tokenizers/text_lines.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::UserError;
using gcrun::testing::TempDir;
using namespace gcrun::tasks;

// A few KB of sentences of a small English vocabulary, the same every time.
std::vector<std::string> sentences(int count) {
  static const char* const words[] = {"the",  "quick", "brown", "fox",   "jumps", "over",   "lazy",  "dog",
                                      "and",  "then",  "runs",  "into",  "a",     "forest", "where", "many",
                                      "tall", "trees", "grow",  "under", "blue",  "sky",    "today", "again"};
  std::mt19937 random(3);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string sentence;
    for (int w = 0; w < 8; ++w) sentence += std::string(w ? " " : "") + words[random() % std::size(words)];
    out.push_back(sentence + ".");
  }
  return out;
}

TrainedSentencePiece train(const std::string& type, uint64_t seed) {
  const auto text = sentences(200);
  size_t next = 0;
  return trainSentencePiece([&](std::string& s) { return next < text.size() && (s = text[next++], true); },
                            {50, type, seed});
}

std::string writeModel(const TempDir& dir, const std::string& model) {
  const std::string path = dir.file("m.model");
  std::ofstream(path, std::ios::binary) << model;
  return path;
}

TEST(SentencePieceTraining, TheSameSentencesAndSeedGiveTheSameModelBytes) {
  for (const char* type : {"bpe", "unigram"}) {
    const auto first = train(type, 5);
    EXPECT_EQ(first.sentences, 200) << type;
    EXPECT_GT(first.characters, 200 * 20) << type;
    EXPECT_EQ(train(type, 5).model, first.model) << type;
  }
}

TEST(SentencePieceTraining, AVocabularyTheSentencesCannotFillIsRefusedNamingTheFlag) {
  const auto text = sentences(5);
  size_t next = 0;
  try {
    trainSentencePiece([&](std::string& s) { return next < text.size() && (s = text[next++], true); },
                       {100000, "bpe", 0});
    FAIL() << "trained";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab-size 100000"), std::string::npos) << e.what();
  }
}

TEST(SentencePieceTokenizer, DecodeOfEncodeGivesTheTextBackWithItsLineBreaks) {
  TempDir dir;
  const SentencePieceTokenizer tokenizer(writeModel(dir, train("bpe", 0).model));
  EXPECT_EQ(tokenizer.vocabularySize(), 50);
  const std::string text = "the lazy dog runs.\nthen a fox jumps over the trees.\n\nblue sky";
  const auto ids = tokenizer.encode(text);
  EXPECT_LT(ids.size(), text.size());  // pieces, some of several characters
  for (const int64_t id : ids) EXPECT_TRUE(id >= 0 && id < 50) << id;
  EXPECT_EQ(tokenizer.decode(ids), text);
}

TEST(SentencePieceTokenizer, ATextFileGivesTheIdsOfItsTextInTheTypeAskedFor) {
  TempDir dir;
  const SentencePieceTokenizer tokenizer(writeModel(dir, train("unigram", 0).model));
  const std::string text = "the quick brown fox.\nunder the blue sky again.\n";
  std::ofstream(dir.file("t.txt")) << text;
  const at::Tensor ids = encodeTextFile(tokenizer, dir.file("t.txt"), at::kShort, 1 << 20, 0);
  EXPECT_EQ(ids.scalar_type(), at::kShort);
  const at::Tensor wide = ids.to(at::kLong);
  const std::vector<int64_t> got(wide.data_ptr<int64_t>(), wide.data_ptr<int64_t>() + wide.numel());
  EXPECT_EQ(got, tokenizer.encode(text));
}

void expectRefusedModel(const std::string& path, const std::string& part) {
  try {
    SentencePieceTokenizer tokenizer(path);
    FAIL() << path << " loaded";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("task.tokenizer: ", 0), 0u) << message;
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

// A run asks for the model's vocabulary several times before it reads the data: one load serves
// them all, and a model file replaced meanwhile is loaded again.
TEST(SentencePieceTokenizer, TheSharedTokenizerIsLoadedOncePerVersionOfTheFile) {
  TempDir dir;
  const std::string path = writeModel(dir, train("bpe", 0).model);
  const auto first = sharedSentencePieceTokenizer(path);
  EXPECT_EQ(sharedSentencePieceTokenizer(path), first);
  const std::string other = dir.file("other.model");
  std::ofstream(other, std::ios::binary) << train("unigram", 3).model;
  std::filesystem::rename(other, path);  // another inode, as a tool that rewrites a file gives
  const auto second = sharedSentencePieceTokenizer(path);
  EXPECT_NE(second, first);
  EXPECT_EQ(second->encode("the dog"), SentencePieceTokenizer(path).encode("the dog"));
  EXPECT_THROW(sharedSentencePieceTokenizer(dir.file("missing.model")), UserError);
}

TEST(SentencePieceTokenizer, AMissingHugeOrMalformedModelIsRefusedNamingTheKeyAndFile) {
  TempDir dir;
  expectRefusedModel(dir.file("missing.model"), dir.file("missing.model"));
  std::ofstream(dir.file("bad.model")) << "not a protocol buffer";
  expectRefusedModel(dir.file("bad.model"), dir.file("bad.model"));
  std::ofstream(dir.file("huge.model")).close();
  std::filesystem::resize_file(dir.file("huge.model"), kMaxSentencePieceModelBytes + 1);
  expectRefusedModel(dir.file("huge.model"), dir.file("huge.model"));
  expectRefusedModel(dir.path().string(), dir.path().string());
}

TEST(TextLines, LongLinesComeInPiecesCutAfterASpace) {
  TempDir dir;
  std::string word = "abcdefg ";
  std::string line;
  while (line.size() < kMaxTextLineBytes + 100) line += word;
  std::ofstream(dir.file("t.txt")) << line << "\nlast";
  TextLines lines({dir.file("t.txt")}, 4 * kMaxTextLineBytes);
  std::string got;
  ASSERT_TRUE(lines.next(got));
  EXPECT_LE(got.size(), kMaxTextLineBytes);
  EXPECT_EQ(got.back(), ' ');
  EXPECT_FALSE(lines.lineEnded());
  std::string rest;
  ASSERT_TRUE(lines.next(rest));
  EXPECT_TRUE(lines.lineEnded());
  EXPECT_EQ(got + rest, line);
  ASSERT_TRUE(lines.next(got));
  EXPECT_EQ(got, "last");
  EXPECT_FALSE(lines.next(got));
}

}  // namespace
