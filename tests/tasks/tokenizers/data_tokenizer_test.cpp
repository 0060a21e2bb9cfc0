// `gcrun data tokenizer` and task.level sentencepiece through the binary: the same command twice
// writes the same bytes; the output is refused if it exists (without --force) and never written
// through a planted symlink; a GPT trains on the model's pieces; and bad flags, a missing
// task.tokenizer or a bad model file are one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "tests/support/command.h"
#include "tests/support/refusal.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gcrun::testing::contains;
using gcrun::testing::expectRefused;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kLimit = "timeout 120 ";
const std::string kTinyGpt =
    " --set training.max_steps=3 --set training.batch_size=2 --set task.layers=1 --set task.heads=2"
    " --set task.width=16 --set task.context=16 --set evaluation.max_samples=320 --set output.sinks=[jsonl]";

void writeFile(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// `lines` lines of words from a small English vocabulary, seeded.
std::string text(int lines, unsigned seed) {
  static const char* const words[] = {"the",   "quick", "brown", "fox",   "jumps", "over", "lazy",
                                      "dog",   "and",   "then",  "runs",  "into",  "a",    "forest",
                                      "where", "many",  "tall",  "trees", "grow",  "blue", "sky"};
  std::mt19937 random(seed);
  std::string out;
  for (int i = 0; i < lines; ++i) {
    for (int w = 0; w < 10; ++w) out += std::string(w ? " " : "") + words[random() % std::size(words)];
    out += ".\n";
  }
  return out;
}

std::string dataTokenizer(const TempDir& corpus, const std::string& output, const std::string& more = "") {
  return kLimit + kGcrun + " data tokenizer --input " + corpus.path().string() + " --vocab-size 45 --output " + output +
         more;
}

TEST(DataTokenizer, TheSameCommandTwiceWritesTheSameBytes) {
  TempDir corpus, dir;
  writeFile(corpus.file("a.txt"), text(150, 1));
  writeFile(corpus.file("b.txt"), text(150, 2));
  for (const char* type : {"bpe", "unigram"}) {
    const std::string first = dir.file(std::string(type) + "1.model"), second = dir.file(std::string(type) + "2.model");
    const auto result = runCommand(dataTokenizer(corpus, first, std::string(" --seed 3 --model-type ") + type));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "300 sentences")) << result.output;
    EXPECT_FALSE(contains(result.output, "trainer_interface")) << result.output;  // SentencePiece's own logging
    ASSERT_EQ(runCommand(dataTokenizer(corpus, second, std::string(" --seed 3 --model-type ") + type)).exit_code, 0);
    EXPECT_EQ(readFile(first), readFile(second)) << type;
    EXPECT_GT(readFile(first).size(), 1000u);
  }
}

TEST(DataTokenizer, AnExistingOutputIsRefusedWithoutForceAndALinkThereIsReplaced) {
  TempDir corpus, dir;
  writeFile(corpus.file("a.txt"), text(100, 1));
  const std::string output = dir.file("t.model"), victim = dir.file("victim");
  writeFile(victim, "not gcrun's to write\n");
  fs::create_symlink(victim, output);
  expectRefused(runCommand(dataTokenizer(corpus, output)), "--force");
  const auto result = runCommand(dataTokenizer(corpus, output, " --force"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(readFile(victim), "not gcrun's to write\n");
  EXPECT_FALSE(fs::is_symlink(output));
}

TEST(DataTokenizer, BadFlagsAreOneLineAndExit2) {
  TempDir corpus, dir;
  writeFile(corpus.file("a.txt"), text(20, 1));
  expectRefused(runCommand(dataTokenizer(corpus, dir.file("t.model"), " --model-type word")), "--model-type");
  expectRefused(runCommand(kLimit + kGcrun + " data tokenizer --input " + corpus.path().string() + " --output " +
                           dir.file("t.model")),
                "--vocab-size");
  expectRefused(runCommand(kLimit + kGcrun + " data tokenizer --input " + dir.file("none") +
                           " --vocab-size 45 --output " + dir.file("t.model")),
                dir.file("none"));
  expectRefused(runCommand(kLimit + kGcrun + " data tokenizer --input " + corpus.path().string() +
                           " --vocab-size 50000 --output " + dir.file("t.model")),
                "--vocab-size");
}

// wiki.{train,valid,test}.tokens of plain text, and a model trained on the training file.
std::string prepare(const TempDir& data, const TempDir& corpus, const TempDir& dir) {
  writeFile(data.file("wiki.train.tokens"), text(300, 1));
  writeFile(data.file("wiki.valid.tokens"), text(40, 2));
  writeFile(data.file("wiki.test.tokens"), text(40, 3));
  writeFile(corpus.file("train.txt"), text(300, 1));
  const std::string model = dir.file("t.model");
  const auto result = runCommand(dataTokenizer(corpus, model));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return model;
}

std::string gptRun(const TempDir& data, const std::string& out, const std::string& more) {
  return kLimit + kGcrun + " experiment brown-gpt-adamw --output-dir " + out +
         " --set task.data_dir=" + data.path().string() + " --set task.level=sentencepiece" + kTinyGpt + more;
}

TEST(SentencePieceLevel, AGptTrainsOnTheModelsPiecesAndSaysWhatItRead) {
  TempDir data, corpus, dir;
  const std::string model = prepare(data, corpus, dir);
  const auto result = runCommand(gptRun(data, dir.file("run"), " --set task.tokenizer=" + model));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "vocabulary 45 (sentencepiece level")) << result.output;
  EXPECT_TRUE(contains(result.output, "the pieces of " + model)) << result.output;
  EXPECT_TRUE(contains(result.output, "validation ")) << result.output;
}

TEST(SentencePieceLevel, AMissingKeyOrABadModelFileIsOneLineAndExit2) {
  TempDir data, corpus, dir;
  prepare(data, corpus, dir);
  expectRefused(runCommand(gptRun(data, dir.file("a"), "")), "task.tokenizer");
  writeFile(dir.file("bad.model"), "not a model");
  expectRefused(runCommand(gptRun(data, dir.file("b"), " --set task.tokenizer=" + dir.file("bad.model"))),
                dir.file("bad.model"));
  expectRefused(runCommand(gptRun(data, dir.file("c"), " --set task.tokenizer=" + dir.file("none.model"))),
                dir.file("none.model"));
  expectRefused(runCommand(gptRun(data, dir.file("d"), " --set task.level=subword")), "sentencepiece");
}

}  // namespace
